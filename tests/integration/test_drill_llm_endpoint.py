"""Drill (issue 17, item 2, last part): the LLM endpoint down or refusing, mid-rollout and
mid-stage. The upstream is the scripted OpenAI-compatible server over real HTTP on
127.0.0.1, behind the real LLM gateway; it goes down for real (its listener closed: the next
call is refused) or answers 500, 503 or 429 (with Retry-After), for a couple of calls
(transient: the openai client's retries must absorb it) or for good (persistent).

- Mid-rollout (the rollout engine, the tool-calling harness, a real weather_report package
  in the bubblewrap sandbox): a transient failure leaves a valid trajectory with the agent's
  work intact (reward 1); a persistent one an *invalid* trajectory whose termination and
  reason name the model error — never a reward, never a 0. Then, with the endpoint back,
  the next rollout is valid.
- Mid-stage (the local loop, LLM Builder and Verifier Constructor): a persistent failure
  ends the stage failed and retryable, with the endpoint's error in the reason; the loop's
  retry runs that stage only (no earlier stage redone) and the environment is released.

Figures: time to recover (first failure → the next model answer), what was lost.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from coworkgym.llm.settings import LLMSettings
from coworkgym.loop.local import EnvironmentRun, LocalLoop
from coworkgym.loop.machine import Event, Phase, RunStage, StageFailed
from coworkgym.package.package import EnvironmentPackage
from coworkgym.release import publisher_for
from coworkgym.roles.llm import configure_llm_backends, role_backends
from coworkgym.rollout.engine import RolloutEngine
from coworkgym.rollout.harness import PolicyConfig
from coworkgym.rollout.trajectory import Trajectory
from coworkgym.runtime.local import LocalRuntime
from tests.drills.record import DrillResult, Row, record
from tests.fixtures.llm.server import FIXTURES, ScriptedServer, lane_of
from tests.integration.test_llm_roles import llm_spec
from tests.support.builders import good_package

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
MODEL = "drill-model"
TRANSIENT_FAILURES = 2  # within the clients' retries (the harness's 3, the roles' 4)
PERSISTENT_FAILURES = 12  # beyond them
ROLE_ATTEMPTS = LLMSettings(MODEL, "http://unused").max_retries + 1  # a role's client's tries
DOWN_FOR_S = 1.0  # a transient outage: shorter than the client's backoff (>= 2.6 s in all)
# A mid-stage outage: longer than the roles' client backs off (<= 7.5 s over 5 attempts),
# shorter than the stage and its retry together (>= 11.2 s): the retry must ride it out.
STAGE_DOWN_FOR_S = 9.0


# ---- an upstream that can go down -----------------------------------------------------
@dataclass
class Upstream(ScriptedServer):
    """The scripted server as an upstream that fails for real: every answer closes its
    connection (so once the listener is closed the very next call is refused, as from a
    dead server), and every answer is stamped. ``outage`` = (after the N-th answer, down
    for S seconds; None: until ``come_back``)."""

    outage: tuple[int, float | None] | None = None
    answered: list[tuple[float, str, int]] = field(default_factory=list)  # (time, lane, status)
    downs: list[tuple[float, float | None]] = field(default_factory=list)  # (down at, back at)
    _timers: list[threading.Timer] = field(default_factory=list)

    @classmethod
    def scripted(
        cls, lanes: dict[str, list[dict[str, Any]]], outage: tuple[int, float | None] | None
    ) -> Upstream:
        made = cls.from_lanes(lanes, outage=outage)
        assert isinstance(made, Upstream)
        return made

    def __enter__(self) -> Upstream:
        super().__enter__()
        assert self._server is not None
        self.port = self._server.server_address[1]  # a restart listens where clients call
        return self

    def __exit__(self, *exc: object) -> None:
        for timer in self._timers:
            timer.cancel()
        super().__exit__(*exc)

    def answer(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, str], bytes]:
        status, out, payload = super().answer(path, headers, body)
        with self._lock:
            self.answered.append((time.monotonic(), lane_of(body), status))
            count = len(self.answered)
        if self.outage is not None and count == self.outage[0]:
            self.go_down(self.outage[1])  # before this answer leaves: the next call is refused
        return status, {**out, "connection": "close"}, payload

    def go_down(self, for_s: float | None) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        self.downs.append((time.monotonic(), None))
        if for_s is not None:
            timer = threading.Timer(for_s, self.come_back)
            self._timers.append(timer)
            timer.start()

    def come_back(self) -> None:
        self.__enter__()
        self.downs[-1] = (self.downs[-1][0], time.monotonic())

    def first_failure(self) -> float | None:
        failed = [t for t, _, status in self.answered if status != 200]
        candidates = failed[:1] + [down for down, _ in self.downs[:1]]
        return min(candidates) if candidates else None

    def recovery_s(self) -> float | None:
        """First failure → the next answered call: how long the work stood still."""
        start = self.first_failure()
        if start is None:
            return None
        after = [t for t, _, status in self.answered if status == 200 and t > start]
        return round(after[0] - start, 2) if after else None

    def errors(self) -> int:
        return sum(1 for _, _, status in self.answered if status != 200)


# ---- the failures -------------------------------------------------------------------------
@dataclass(frozen=True)
class Failure:
    id: str
    what: str
    answer: dict[str, Any] | None  # the scripted error answer; None: the endpoint is down
    names: tuple[str, ...]  # what the reason must name

    def steps(self, times: int) -> list[dict[str, Any]]:
        return [] if self.answer is None else [{**self.answer, "times": times}]


DOWN = Failure(
    "down", "the endpoint down (its listener closed: connection refused)", None,
    ("502", "upstream_unreachable"),
)  # fmt: skip
HTTP_500 = Failure("http-500", "HTTP 500", {"status": 500}, ("HTTP 500",))
HTTP_503 = Failure("http-503", "HTTP 503", {"status": 503}, ("HTTP 503",))
HTTP_429 = Failure(
    "http-429",
    "HTTP 429 rate_limit_exceeded, Retry-After 1",
    {
        "status": 429,
        "headers": {"retry-after": "1"},
        "body": {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
    },
    ("HTTP 429", "rate_limit_exceeded"),
)
QUOTA = Failure(
    "http-429-quota",
    "HTTP 429 insufficient_quota (the provider's account, not the rollout's budget)",
    {
        "status": 429,
        "body": {
            "error": {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    },
    ("HTTP 429", "insufficient_quota"),
)


@dataclass(frozen=True)
class RolloutCase:
    failure: Failure
    persistent: bool

    @property
    def id(self) -> str:
        return f"rollout/{self.failure.id}/{'persistent' if self.persistent else 'transient'}"


ROLLOUT_CASES = [
    RolloutCase(f, persistent)
    for f in (DOWN, HTTP_500, HTTP_503, HTTP_429)
    for persistent in (False, True)
] + [RolloutCase(QUOTA, True)]


@dataclass(frozen=True)
class StageCase:
    failure: Failure
    stage: str  # whose lane fails (after that role's second answer)
    persistent: bool

    @property
    def id(self) -> str:
        variant = "persistent" if self.persistent else "transient"
        return f"stage/{self.stage}/{self.failure.id}/{variant}"


STAGE_CASES = [
    StageCase(HTTP_503, "verifier", persistent=False),
    StageCase(HTTP_500, "builder", persistent=True),
    StageCase(HTTP_503, "verifier", persistent=True),
    StageCase(HTTP_429, "verifier", persistent=True),
    StageCase(DOWN, "verifier", persistent=True),
]


# ---- mid-rollout -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def package() -> EnvironmentPackage:
    return good_package("weather_report", turns=1, seed=7)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def solving(pkg: EnvironmentPackage) -> list[dict[str, Any]]:
    """A capable agent's three calls (the test knows the answer; the agent is scripted)."""
    script = pkg.files["solution/solve.sh"].decode()
    return [
        call("list_files", path="."),
        call("shell", command=f"export COWORK_TURN=0\n{script}"),
        call("finish", summary="Done.", deliverables=["report.xlsx", "summary.json"]),
    ]


@dataclass
class RolloutOutcome:
    case: RolloutCase
    trajectory: Trajectory
    upstream: Upstream
    seconds: float
    checks: list[tuple[bool, str]]


def roll(engine: RolloutEngine, pkg: EnvironmentPackage, upstream: Upstream) -> Trajectory:
    return engine.run(pkg, "tool-calling", PolicyConfig(model=MODEL, base_url=upstream.url))


def rollout_checks(case: RolloutCase, t: Trajectory, upstream: Upstream) -> list[tuple[bool, str]]:
    v = t.verification
    failed = upstream.errors() > 0 or bool(upstream.downs)
    checks = [(failed, "the failure happened (the upstream failed at least one call)")]
    if not case.persistent:
        return [
            *checks,
            (t.termination.reason == "agent_done", f"ended by {t.termination}"),
            (v is not None and v.valid and t.reward == 1.0, f"verification {v}"),
            (len(t.agent_messages()) == 3, f"{len(t.agent_messages())} agent steps, not 3"),
            (upstream.recovery_s() is not None, "no answer after the failure"),
        ]
    reason = v.invalid_reason if v is not None else None
    return [
        *checks,
        (t.termination.reason == "model_error", f"ended by {t.termination}"),
        (
            all(word in t.termination.detail for word in case.failure.names),
            f"the termination names {case.failure.names}: {t.termination.detail!r}",
        ),
        (v is not None and not v.valid, f"verification {v}"),
        (v is not None and v.reward is None and not v.components, "a reward was recorded"),
        (t.reward is None, f"reward {t.reward}"),
        ("model_error" in (reason or ""), f"invalid reason {reason!r}"),
        (len(t.agent_messages()) == 1, "only the step before the failure is on record"),
    ]


def run_rollouts(pkg: EnvironmentPackage) -> tuple[list[RolloutOutcome], RolloutOutcome]:
    """Every rollout case; then, against the upstream that went down for good, brought back
    at the same address, one more rollout."""
    outcomes: list[RolloutOutcome] = []
    back: RolloutOutcome | None = None
    with RolloutEngine() as engine:
        for case in ROLLOUT_CASES:
            first, *rest = solving(pkg)
            times = PERSISTENT_FAILURES if case.persistent else TRANSIENT_FAILURES
            outage = None
            if case.failure.answer is None:
                outage = (1, None if case.persistent else DOWN_FOR_S)
            upstream = Upstream.scripted(
                {"agent": [first, *case.failure.steps(times), *rest]}, outage=outage
            )
            with upstream:
                started = time.monotonic()
                t = roll(engine, pkg, upstream)
                seconds = time.monotonic() - started
                outcomes.append(
                    RolloutOutcome(case, t, upstream, seconds, rollout_checks(case, t, upstream))
                )
                if case.failure is DOWN and case.persistent:
                    upstream.come_back()
                    upstream.lanes["agent"].extend(solving(pkg))
                    started = time.monotonic()
                    after = roll(engine, pkg, upstream)
                    v = after.verification
                    checks = [
                        (after.termination.reason == "agent_done", f"ended by {after.termination}"),
                        (v is not None and v.valid and after.reward == 1.0, f"verification {v}"),
                    ]
                    back = RolloutOutcome(case, after, upstream, time.monotonic() - started, checks)
    assert back is not None
    return outcomes, back


# ---- mid-stage -------------------------------------------------------------------------
class ObservedLoop(LocalLoop):
    """The local loop as it is, with each stage's outcome kept (time, stage, event)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.performed: list[tuple[float, str, Event]] = []

    def _perform(self, run: EnvironmentRun, action: RunStage) -> Event:
        event = super()._perform(run, action)
        self.performed.append((time.monotonic(), action.stage, event))
        return event


@dataclass
class StageOutcome:
    case: StageCase
    run: EnvironmentRun
    loop: ObservedLoop
    upstream: Upstream
    seconds: float
    lost_calls: int  # model calls answered in the failed attempt, made again by the retry
    checks: list[tuple[bool, str]]


def stage_lanes(case: StageCase) -> tuple[dict[str, list[dict[str, Any]]], int | None]:
    """The clean build's script with the failure after the failing role's second answer
    (and that role's whole script again for the loop's retry); the outage's answer count."""
    lanes: dict[str, list[dict[str, Any]]] = json.loads((FIXTURES / "build_ok.json").read_text())[
        "lanes"
    ]
    script = lanes[case.stage]
    if case.failure.answer is None:  # down mid-stage: the retry starts the role's script over
        lanes[case.stage] = [*script[:2], *script]
        before = len(lanes["builder"]) if case.stage == "verifier" else 0
        return lanes, before + 2
    if case.persistent:  # every attempt of the stage's client fails; the loop's retry is answered
        lanes[case.stage] = [*script[:2], *case.failure.steps(ROLE_ATTEMPTS), *script]
    else:
        lanes[case.stage] = [*script[:2], *case.failure.steps(TRANSIENT_FAILURES), *script[2:]]
    return lanes, None


def run_stage(case: StageCase, out: Path) -> StageOutcome:
    spec = llm_spec()
    lanes, down_after = stage_lanes(case)
    outage = None if down_after is None else (down_after, STAGE_DOWN_FOR_S)
    name = case.id.replace("/", "-")
    with Upstream.scripted(lanes, outage=outage) as upstream:
        configure_llm_backends(spec, base_url=upstream.url, model=MODEL)
        with role_backends(name, spec, LocalRuntime(), harbor_lint=False) as roles:
            loop = ObservedLoop(
                roles.builder, roles.constructor, roles.detector, publisher_for(str(out))
            )
            started = time.monotonic()
            run = loop.run(name, spec)
            seconds = time.monotonic() - started
    failures = [(s, e) for _, s, e in loop.performed if isinstance(e, StageFailed)]
    stages = [s for _, s, _ in loop.performed]
    failed_at = upstream.first_failure() or 0.0
    lost = sum(
        1 for t, lane, status in upstream.answered if lane == case.stage and status == 200
        and t < failed_at
    )  # fmt: skip
    checks = [
        (run.status.phase == Phase.RELEASED, f"ended {run.status.phase}: {run.status.message}"),
        (upstream.errors() > 0 or bool(upstream.downs), "the failure happened"),
        (upstream.recovery_s() is not None, "no answer after the failure"),
    ]
    if not case.persistent:
        checks += [
            (not failures, f"stage failures {failures}"),
            (stages == ["builder", "verifier", "detector", "release"], f"stages {stages}"),
        ]
        return StageOutcome(case, run, loop, upstream, seconds, 0, checks)
    expected = ["builder", "verifier", "detector", "release"]
    expected.insert(expected.index(case.stage), case.stage)  # the failed attempt, then its retry
    event = failures[0][1] if failures else None
    message = event.message if isinstance(event, StageFailed) else ""
    checks += [
        (len(failures) == 1 and failures[0][0] == case.stage, f"stage failures {failures}"),
        (isinstance(event, StageFailed) and event.retryable, "the stage failure is not retryable"),
        (message.startswith("upstream_unavailable"), f"reason {message!r}"),
        (all(word in message for word in case.failure.names), f"reason {message!r}"),
        (stages == expected, f"stages {stages}, not {expected}: an earlier stage was redone"),
    ]
    return StageOutcome(case, run, loop, upstream, seconds, lost, checks)


# ---- the drill -------------------------------------------------------------------------
def test_the_llm_endpoint_down_or_refusing_loses_no_work_and_never_scores_0(
    package: EnvironmentPackage, tmp_path: Path
) -> None:
    drill_started = time.monotonic()
    rollouts, back = run_rollouts(package)
    stages = [run_stage(case, tmp_path / str(i)) for i, case in enumerate(STAGE_CASES)]
    rows: list[Row] = []
    for o in rollouts:
        ok = all(good for good, _ in o.checks)
        t = o.trajectory
        kind = "persistent" if o.case.persistent else f"transient ({TRANSIENT_FAILURES} calls)"
        if o.case.failure is DOWN and not o.case.persistent:
            kind = f"transient ({DOWN_FOR_S:g} s)"
        if o.case.persistent:
            lost = "the rollout: recorded invalid, not scored" if ok else "see the test"
            answers = f"{o.upstream.errors()} failing answers" if o.upstream.errors() else "refused"
            note = (
                f"{t.termination.reason}, reward {t.reward}; gave up in {o.seconds:.1f} s "
                f"({answers}): {t.termination.detail[:120]}"
            )
        else:
            lost = "nothing" if ok else "see the test"
            note = f"{t.termination.reason}, reward {t.reward}; {o.seconds:.1f} s"
        rows.append(
            Row(
                what=f"mid-rollout: {o.case.failure.what}, {kind}",
                runs=1,
                held=int(ok),
                lost=lost,
                recovery_s=None if o.case.persistent else o.upstream.recovery_s(),
                note=note,
            )
        )
    back_ok = all(good for good, _ in back.checks)
    rows.append(
        Row(
            what="mid-rollout: the endpoint back at the same address, the next rollout",
            runs=1,
            held=int(back_ok),
            note=f"{back.trajectory.termination.reason}, reward {back.trajectory.reward}; "
            f"{back.seconds:.1f} s",
        )
    )
    for s in stages:
        ok = all(good for good, _ in s.checks)
        failed = [e for _, _, e in s.loop.performed if isinstance(e, StageFailed)]
        kind = "persistent" if s.case.persistent else f"transient ({TRANSIENT_FAILURES} calls)"
        if s.case.failure is DOWN:
            kind = f"{STAGE_DOWN_FOR_S:g} s"
        reason = f"; stage failed, retryable: {failed[0].message[:160]}" if failed else ""
        lost = "nothing"
        if s.lost_calls:
            lost = f"the failed attempt's {s.lost_calls} model calls; no earlier stage redone"
        rows.append(
            Row(
                what=f"mid-stage ({s.case.stage}): {s.case.failure.what}, {kind}",
                runs=1,
                held=int(ok),
                lost=lost if ok else "see the test",
                recovery_s=s.upstream.recovery_s(),
                note=f"{s.run.status.phase}, stages "
                f"{'→'.join(st for _, st, _ in s.loop.performed)}; {s.seconds:.1f} s{reason}",
            )
        )
    transient = [o.upstream.recovery_s() for o in rollouts if not o.case.persistent]
    stage_recovery = [s.upstream.recovery_s() for s in stages]
    figures = {
        "cases": len(ROLLOUT_CASES) + len(STAGE_CASES),
        "rollouts": len(rollouts) + 1,
        "stage_runs": len(stages),
        "rollout_recovery_s_max": max((r for r in transient if r is not None), default=None),
        "stage_recovery_s_max": max((r for r in stage_recovery if r is not None), default=None),
        "persistent_rollouts_scored": sum(
            1 for o in rollouts if o.case.persistent and o.trajectory.reward is not None
        ),
        "zero_rewards_recorded": sum(
            1
            for o in rollouts
            if o.case.persistent
            and o.trajectory.verification is not None
            and o.trajectory.verification.reward == 0.0
        ),
        "stage_failures_not_retryable": sum(
            1
            for s in stages
            for _, _, e in s.loop.performed
            if isinstance(e, StageFailed) and not e.retryable
        ),
        "stages_redone_beyond_the_failed_one": sum(
            max(0, len(s.loop.performed) - 4 - int(s.case.persistent)) for s in stages
        ),
        "stage_model_calls_redone": sum(s.lost_calls for s in stages),
        "released": sum(1 for s in stages if s.run.status.phase == Phase.RELEASED),
    }
    record(
        DrillResult(
            drill="llm-endpoint",
            title="The LLM endpoint down or refusing",
            summary="The scripted OpenAI-compatible server on 127.0.0.1 behind the real LLM "
            "gateway, stopped for real or answering 500/503/429, for a couple of calls or for "
            "good: mid-rollout (the rollout engine's tool-calling harness on a weather_report "
            "package, each case one rollout) and mid-stage (the local loop with the LLM "
            "Builder and Verifier Constructor, each case one environment). Time to recover: "
            "first failure to the next model answer.",
            rows=rows,
            figures=figures,
            seconds=round(time.monotonic() - drill_started, 1),
        )
    )
    failures = [f"{o.case.id}: {why}" for o in rollouts for good, why in o.checks if not good] + [
        f"rollout after the endpoint is back: {why}" for good, why in back.checks if not good
    ]
    failures += [f"{s.case.id}: {why}" for s in stages for good, why in s.checks if not good]
    assert not failures, "\n".join(failures)
