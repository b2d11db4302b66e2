"""The filter's consistency rules on a labelled corpus of faulty trajectories (issue 24,
item 2): every faulty record is dropped by the rule its label names, no clean one is.

The clean records are real rollouts (the rollout engine in its sandbox, oracle, nop and a
harness that asks the user, on a two-turn weather_report package and a plain Harbor task;
each final workspace stored the way the cluster's episode pod stores it) and the fixture
rollouts the other filter tests use. Each faulty record is one of them with one thing
wrong: the faults the filter already caught (tool-call pairing, completeness, endings,
NaN rewards, claims, simulator faults, invalid verdicts) and those it used to keep
(duplicates, missing turns, tampered final workspaces, valid verdicts with a reason or no
components, rewards out of range or not what the components give, a user quoting the
private state, an agent repeating the user). The corpus runs through ``filter_files`` as
``cowork-gym filter`` runs it, with the package and the stored workspaces, and again with
the record alone; the score is recorded for docs/reliability.md (row 24.2).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.package.package import EnvironmentPackage
from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
from coworkgym.rollout.filters import (
    AgentEcho,
    FilterContext,
    FilterPipeline,
    FilterSettings,
    FinalWorkspace,
    FunnelReport,
    Note,
    PackageFacts,
    PrivateState,
    RewardConsistency,
    TurnConsistency,
    UniqueRecords,
    Verdict,
    VerdictConsistency,
    content_digest,
    filter_files,
    load_package_facts,
)
from coworkgym.rollout.filters.settings import DEFAULT_MAX_FILE_BYTES
from coworkgym.rollout.harness import Episode, PolicyConfig, register
from coworkgym.rollout.trajectory import ToolCall, Trajectory, VerificationRecord, dump_line
from coworkgym.rollout.verify import verify_rollout
from coworkgym.runtime.local import LocalRuntime
from tests.corpus.build import plain_harbor_task
from tests.drills.record import DrillResult, Row, record
from tests.fixtures import trajectories as make
from tests.support.builders import good_package

UNITS_QUESTION = "Before I start: which units is the precipitation in?"


@register("consistency-asker")
class Asker:
    """Asks the user about units (the signal plan answers), looks, finishes each turn."""

    name = "consistency-asker"

    def run(self, episode: Episode, policy: PolicyConfig) -> None:
        step = 0
        while not episode.done:
            calls = [ToolCall(id=f"ask-{step}", name="list_files", arguments='{"path": "."}')]
            if step == 0:
                question = json.dumps({"question": UNITS_QUESTION})
                calls.insert(0, ToolCall(id="ask-q", name="ask_user", arguments=question))
            episode.record_agent("Let me check the request and the files first.", calls)
            for call in calls:
                episode.execute(call)
            finish = ToolCall(id=f"fin-{step}", name="finish", arguments='{"summary": "ok"}')
            episode.record_agent("", [finish])
            episode.execute(finish)
            step += 1
            if episode.pending_user_message() is None:
                return


# ---- the clean records: real rollouts, their packages and stored workspaces -------------
# (label, package, harness): a two-turn weather_report package and a plain Harbor task
REAL_ROLLOUTS = [
    ("oracle", "weather", "oracle"),
    ("nop", "weather", "nop"),
    ("asker", "weather", "consistency-asker"),
    ("harbor-oracle", "harbor", "oracle"),
    ("harbor-nop", "harbor", "nop"),
]


@dataclass
class Real:
    """Real rollouts by harness, and what the filter may consult about them."""

    rollouts: dict[str, Trajectory]  # oracle, nop, asker (two turns); harbor-oracle, -nop
    packages: list[str]  # package folders, as `cowork-gym filter --packages` takes them
    store: Path  # <trajectory id>/ final workspaces, as `--workspaces` takes them
    facts: dict[str, PackageFacts]

    def context(self) -> FilterContext:
        return FilterContext(packages=self.facts, workspaces=(self.store,))


class StoringVerifier:
    """Verifies like the engine does, after copying the final workspace aside, as the
    cluster's episode pod copies it to rollouts/<id>/episode/workspace."""

    def __init__(self, into: Path) -> None:
        self.into = into
        self.runtime = LocalRuntime()

    def __call__(
        self, pkg: EnvironmentPackage, workspace: Path, workdir: str, claims: dict[str, Any]
    ) -> VerificationRecord:
        if self.into.exists():
            shutil.rmtree(self.into)
        shutil.copytree(workspace, self.into, symlinks=True)
        return verify_rollout(self.runtime, pkg, workspace, workdir, claims)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Real:
    root = tmp_path_factory.mktemp("consistency")
    weather = good_package("weather_report", turns=2, seed=7)
    raw = plain_harbor_task()
    harbor = EnvironmentPackage.from_files(raw.files, raw.executables)
    folders = [root / "packages" / "weather", root / "packages" / "harbor"]
    weather.write(folders[0])
    harbor.write(folders[1])
    store, pending = root / "store", root / "pending"
    store.mkdir()
    rollouts: dict[str, Trajectory] = {}
    packages = {"weather": weather, "harbor": harbor}
    with RolloutEngine(verifier=StoringVerifier(pending)) as engine:
        for label, package, harness in REAL_ROLLOUTS:
            trajectory = engine.run(packages[package], harness, PolicyConfig(model="scripted"))
            assert trajectory.termination.reason == "agent_done", trajectory.termination
            pending.rename(store / trajectory.id)
            rollouts[label] = trajectory
    sources = [str(f) for f in folders]
    return Real(rollouts, sources, store, load_package_facts(sources))


# ---- the corpus -------------------------------------------------------------------------
Data = dict[str, Any]
Edit = Callable[[Data], None]


def unchanged(data: Data) -> None:
    pass


@dataclass(frozen=True)
class Fault:
    """One faulty record: a clean base with one edit, and the rule that must drop it."""

    name: str
    what: str  # the fault, in words (a row of the drill's table)
    rule: str
    reason: str
    base: str | Callable[[], Trajectory]  # a real rollout's label, or a fixture scenario
    edit: Edit = unchanged
    rekey: bool = True  # a rollout of its own (a new sample number): False keeps the id
    needs: str = ""  # "package" or "store" when the record alone cannot show the fault


def _message(data: Data, index: int) -> Data:
    message: Data = data["messages"][index]
    return message


def _first(data: Data, **fields: object) -> Data:
    return next(m for m in data["messages"] if all(m.get(k) == v for k, v in fields.items()))


def _report(files: list[Data]) -> Data:
    return next(f for f in files if f["path"] == "report.xlsx")


def drop_turn_1(data: Data) -> None:
    data["messages"] = [m for m in data["messages"] if m["turn"] == 0]


def record_three_turns(data: Data) -> None:
    data["environment"]["turns"] = 3


def agent_message_in_earlier_turn(data: Data) -> None:
    _first(data, role="assistant", turn=1)["turn"] = 0


def tamper_final_digest(data: Data) -> None:
    _report(data["final_workspace"])["sha256"] = "0" * 64


def final_file_of_1tb(data: Data) -> None:
    _report(data["final_workspace"])["size"] = 10**12


def tamper_digest_and_events(data: Data) -> None:
    """Rewritten consistently in the record: only the stored workspace can tell."""
    forged = "f" * 64
    _report(data["final_workspace"])["sha256"] = forged
    for event in data["workspace_events"]:
        for change in event["files"]:
            if change["path"] == "report.xlsx" and change["sha256_after"]:
                change["sha256_after"] = forged


def final_size_off_by_one(data: Data) -> None:
    _report(data["final_workspace"])["size"] += 1


def valid_with_infrastructure_reason(data: Data) -> None:
    data["verification"]["invalid_reason"] = "infrastructure: the verify pod's node went away"


def disguised_valid_zero(data: Data) -> None:
    data["verification"] = {"valid": True, "reward": 0.0, "passed": False}


def reward_of(value: float) -> Edit:
    def edit(data: Data) -> None:
        data["verification"]["reward"] = value
        data["verification"]["passed"] = value >= 0.99

    return edit


def inflated_code_score(data: Data) -> None:
    data["verification"].update(code_score=0.8, reward=0.8)


def component_missing(data: Data) -> None:
    data["verification"]["components"].popitem()


def rubric_without_judge(data: Data) -> None:
    data["verification"]["rubric_score"] = 1.0


def _goal(real: Real) -> str:
    facts = real.facts[real.rollouts["oracle"].environment.digest]
    return next(i.text for i in facts.private if i.kind == "latent goal")


def turn_quotes_goal(goal: str) -> Edit:
    def edit(data: Data) -> None:
        message = _first(data, role="user", turn=1)
        message["content"] += f" Between us: {goal}"
        data["interventions"][0]["message"] = message["content"]

    return edit


def answer_quotes_goal(goal: str) -> Edit:
    def edit(data: Data) -> None:
        _first(data, role="tool", source="user")["content"] = f"It is in mm. Also: {goal}"

    return edit


def agent_repeats_user(data: Data) -> None:
    _first(data, role="assistant", turn=1)["content"] = _first(data, role="user", turn=1)["content"]


def agent_repeats_tool(data: Data) -> None:
    messages = data["messages"]
    index = next(i for i, m in enumerate(messages) if m["content"].startswith("Turn ended"))
    messages[index - 1]["content"] = messages[index]["content"]


def duplicate_call_id(data: Data) -> None:
    data["messages"][4]["tool_calls"][0]["id"] = "call_0"


def faults(goal: str) -> list[Fault]:
    """The labelled faults; ``goal`` is the package's private latent goal."""
    return [
        # what the filter caught before (the 12, and their neighbours)
        Fault("unanswered", "a tool call with no result", "record_integrity",
              "unanswered_tool_call", make.with_unanswered_call),
        Fault("orphan", "a tool result with no call", "record_integrity",
              "orphan_tool_result", make.with_orphan_result),
        Fault("answered-twice", "a tool call answered twice", "record_integrity",
              "duplicate_tool_result", make.with_duplicate_result),
        Fault("call-id-twice", "two tool calls with one id", "record_integrity",
              "duplicate_tool_call_id", make.solved, duplicate_call_id),
        Fault("unfinished", "no finished_at", "record_integrity", "incomplete", make.unfinished),
        Fault("harness-crash", "the harness crashed", "record_integrity", "harness_crash",
              lambda: make.ended("harness_crash", "KeyError")),
        Fault("truncated", "ended on max_steps", "record_integrity", "truncated:max_steps",
              lambda: make.ended("max_steps")),
        Fault("infrastructure", "ended by an infrastructure error", "infrastructure_faults",
              "termination:infrastructure_error", lambda: make.ended("infrastructure_error")),
        Fault("model-error", "ended by a model error", "infrastructure_faults",
              "termination:model_error", lambda: make.ended("model_error")),
        Fault("nan-reward", "a NaN reward", "verified_outcome", "reward_not_finite",
              lambda: make.failed(float("nan"))),
        Fault("verifier-crashed", "an invalid verdict", "verified_outcome",
              "verification_invalid", make.verifier_crashed),
        Fault("unverified", "no verdict", "verified_outcome", "unverified", make.unverified),
        Fault("claims-missing", "claims a file it never wrote", "claim_evidence",
              "claimed_missing", make.claims_missing_file),
        Fault("claims-unchanged", "claims an input it left unchanged", "claim_evidence",
              "claimed_unchanged", make.claims_unchanged_input),
        Fault("simulator-leak", "a recorded simulator leak", "simulator_faults",
              "simulator_fault:private_state_leaked", make.with_simulator_fault),
        Fault("simulator-ended", "ended by the simulator", "simulator_faults",
              "termination:simulator_fault", lambda: make.ended("simulator_fault", "timeout")),
        # what it kept before this rule set
        Fault("same-id", "an exact duplicate (same id)", "unique_records", "duplicate_id",
              "oracle", rekey=False),
        Fault("same-content", "the same record under another sample number",
              "unique_records", "duplicate_content", "nop"),
        Fault("turn-1-missing", "turn 1's messages missing, the record says two turns",
              "turn_consistency", "turns_missing", "oracle", drop_turn_1),
        Fault("turn-count", "three turns recorded for a two-turn package", "turn_consistency",
              "turn_count_mismatch", "oracle", record_three_turns),  # alone: turns_missing
        Fault("turn-order", "a turn-1 agent message tagged turn 0", "turn_consistency",
              "message_outside_its_turn", "oracle", agent_message_in_earlier_turn),
        Fault("tampered-digest", "a tampered final-workspace digest", "final_workspace",
              "final_disagrees_with_events", "oracle", tamper_final_digest),
        Fault("1tb", "a final-workspace file of 1 TB", "final_workspace",
              "final_size_impossible", "oracle", final_file_of_1tb),
        Fault("forged-digest", "a digest forged in the final workspace and the events",
              "final_workspace", "final_digest_mismatch", "oracle", tamper_digest_and_events,
              needs="store"),
        Fault("forged-size", "a final size off by one byte", "final_workspace",
              "final_size_mismatch", "oracle", final_size_off_by_one, needs="store"),
        Fault("valid-with-reason", "valid: true with an infrastructure invalid_reason",
              "verdict_consistency", "valid_with_invalid_reason", "oracle",
              valid_with_infrastructure_reason),
        Fault("disguised-zero", "an infrastructure fault disguised as a valid 0",
              "verdict_consistency", "valid_without_components", "nop", disguised_valid_zero),
        Fault("components-missing", "a component score missing", "verdict_consistency",
              "components_mismatch", "oracle", component_missing, needs="package"),
        Fault("rubric-no-judge", "a rubric score with no judge run", "verdict_consistency",
              "rubric_without_judge", "oracle", rubric_without_judge),
        Fault("reward-7.5", "a reward of 7.5", "reward_consistency", "reward_out_of_range",
              "oracle", reward_of(7.5)),
        Fault("reward-not-components", "reward 1 where every component scored 0",
              "reward_consistency", "reward_disagrees", "nop", reward_of(1.0)),
        Fault("code-score", "a code score no weighting of the components gives",
              "reward_consistency", "code_score_disagrees", "nop", inflated_code_score),
        Fault("goal-in-turn", "a user turn quoting the private goal, no fault recorded",
              "private_state", "private_state_quoted", "oracle", turn_quotes_goal(goal),
              needs="package"),
        Fault("goal-in-answer", "an answer to ask_user quoting the private goal",
              "private_state", "private_state_quoted", "asker", answer_quotes_goal(goal),
              needs="package"),
        Fault("echoes-user", "an agent message carrying the user's own text", "agent_echo",
              "agent_echoes_user", "oracle", agent_repeats_user),
        Fault("echoes-tool", "an agent message equal to a tool result", "agent_echo",
              "agent_echoes_tool", "oracle", agent_repeats_tool),
    ]  # fmt: skip


def clean_fixtures() -> list[Trajectory]:
    return make.numbered(
        [
            make.solved(),
            make.failed(0.0),
            make.solved(reward=0.6),
            make.with_recovered_tool_error(),
            make.solved(with_tokens=False),
        ]
    )


@dataclass
class Corpus:
    clean: list[Trajectory]
    faulty: list[tuple[Fault, Trajectory]]

    def lines(self) -> list[str]:
        """The JSON lines, clean records first (so a copy comes after its original); NaN
        stays a JSON NaN, as a writer that does not null it would store it."""
        records = [*self.clean, *(t for _, t in self.faulty)]
        return [json.dumps(t.model_dump(mode="json")) + "\n" for t in records]


@pytest.fixture(scope="module")
def corpus(real: Real) -> Corpus:
    faulty = []
    for index, fault in enumerate(faults(_goal(real))):
        base = real.rollouts[fault.base] if isinstance(fault.base, str) else fault.base()
        data = base.model_dump(mode="json")
        fault.edit(data)
        if fault.rekey:
            data["key"]["sample"] = 1000 + index
        trajectory = Trajectory.model_validate(data)
        if isinstance(fault.base, str) and trajectory.id != base.id:
            # a rollout of its own: its final workspace is stored under its own id too
            shutil.copytree(real.store / base.id, real.store / trajectory.id)
        faulty.append((fault, trajectory))
    return Corpus([*real.rollouts.values(), *clean_fixtures()], faulty)


@dataclass
class Run:
    report: FunnelReport
    verdicts: dict[int, Verdict]  # line number (1-based) -> why it was dropped
    seconds: float


def run_filter(
    corpus: Corpus, folder: Path, context: FilterContext | None, workers: int = 1
) -> Run:
    source = folder / "corpus.jsonl"
    source.write_text("".join(corpus.lines()))
    verdicts: dict[int, Verdict] = {}

    def hear(where: str, trajectory_id: str, verdict: Verdict) -> None:
        verdicts[int(where.rsplit(":", 1)[1])] = verdict

    started = time.perf_counter()
    report = filter_files(
        [source], folder / f"kept-{workers}.jsonl", FilterSettings(), context,
        on_drop=hear, workers=workers,
    )  # fmt: skip
    return Run(report, verdicts, time.perf_counter() - started)


@dataclass
class Score:
    caught: list[str]  # fault names dropped by their labelled rule
    missed: list[str]  # "name: kept" or "name: dropped by rule/reason, labelled rule/reason"
    clean_dropped: list[str]
    faulty: int
    clean: int

    @property
    def line(self) -> str:
        return (
            f"caught {len(self.caught)}/{self.faulty} faulty, dropped "
            f"{len(self.clean_dropped)}/{self.clean} clean"
        )


def score(corpus: Corpus, run: Run, *, reasons: bool = True) -> Score:
    clean_dropped = [
        f"{t.id} ({t.policy.harness}): {run.verdicts[n].rule}/{run.verdicts[n].drop.reason}"
        for n, t in enumerate(corpus.clean, start=1)
        if n in run.verdicts
    ]
    caught, missed = [], []
    for n, (fault, _) in enumerate(corpus.faulty, start=len(corpus.clean) + 1):
        verdict = run.verdicts.get(n)
        if verdict is None:
            missed.append(f"{fault.name}: kept")
        elif verdict.rule != fault.rule or (reasons and verdict.drop.reason != fault.reason):
            missed.append(
                f"{fault.name}: dropped by {verdict.rule}/{verdict.drop.reason} "
                f"({verdict.drop.detail}), labelled {fault.rule}/{fault.reason}"
            )
        else:
            caught.append(fault.name)
    return Score(caught, missed, clean_dropped, len(corpus.faulty), len(corpus.clean))


# ---- the score --------------------------------------------------------------------------
def test_the_corpus_is_caught_in_full_and_no_clean_record_is_dropped(
    real: Real, corpus: Corpus, tmp_path: Path
) -> None:
    full = run_filter(corpus, tmp_path, real.context())
    result = score(corpus, full)
    alone = run_filter(corpus, tmp_path, None)  # the record alone: no package, no store
    by_record = score(corpus, alone, reasons=False)
    needs = {f.name for f, _ in corpus.faulty if f.needs}
    print(f"with packages and stored workspaces: {result.line}")
    print(f"the record alone: {by_record.line} (needing the package or the store: {len(needs)})")
    _record(corpus, full, result, by_record)
    assert result.missed == [] and result.clean_dropped == [], (result.missed, result.clean_dropped)
    assert by_record.clean_dropped == []
    assert sorted(m.split(":")[0] for m in by_record.missed) == sorted(needs)
    stages = {s.rule: s for s in alone.report.stages}
    # what the record alone could not check is in the funnel, not silently passed
    assert stages["private_state"].notes["no_package"] == stages["private_state"].kept
    assert stages["final_workspace"].notes["no_stored_workspace"] == stages["final_workspace"].kept


def _record(corpus: Corpus, full: Run, result: Score, by_record: Score) -> None:
    rows = []
    for rule in dict.fromkeys(f.rule for f, _ in corpus.faulty):
        kinds = [f for f, _ in corpus.faulty if f.rule == rule]
        held = sum(1 for f in kinds if f.name in result.caught)
        rows.append(
            Row(
                what=f"{rule}: " + "; ".join(f.what for f in kinds),
                runs=len(kinds),
                held=held,
                lost="nothing" if held == len(kinds) else "faulty records kept",
                note=", ".join(sorted({f.reason for f in kinds})),
            )
        )
    kept = len(corpus.clean) - len(result.clean_dropped)
    rows.append(
        Row(
            what="clean records: real rollouts (oracle, nop, a harness asking the user, on a "
            "two-turn package and a plain Harbor task) and the filter tests' fixtures",
            runs=len(corpus.clean),
            held=kept,
            lost="nothing" if not result.clean_dropped else "clean records dropped",
            note=f"{kept} kept",
        )
    )
    record(
        DrillResult(
            drill="faulty-trajectories",
            title="Faulty trajectories through the filter",
            summary=f"A labelled corpus ({len(corpus.faulty)} faulty records, each a clean "
            "one with one thing wrong, and the clean ones) through `filter_files` as "
            "`cowork-gym filter --packages … --workspaces …` runs it; held = dropped by the "
            f"labelled rule with the labelled reason, or clean and kept. {result.line}; the "
            f"record alone (no package, no stored workspace): {by_record.line}.",
            rows=rows,
            figures={
                "faulty": result.faulty,
                "caught": len(result.caught),
                "clean": result.clean,
                "clean_dropped": len(result.clean_dropped),
                "caught_record_alone": len(by_record.caught),
                "cases": result.faulty + result.clean,
            },
            seconds=round(full.seconds, 2),
        )
    )


def test_workers_judge_the_corpus_the_same(real: Real, corpus: Corpus, tmp_path: Path) -> None:
    one = run_filter(corpus, tmp_path, real.context())
    two = run_filter(corpus, tmp_path, real.context(), workers=2)
    assert (tmp_path / "kept-1.jsonl").read_bytes() == (tmp_path / "kept-2.jsonl").read_bytes()
    assert one.verdicts == two.verdicts
    assert one.report.model_dump(exclude={"elapsed_s"}) == two.report.model_dump(
        exclude={"elapsed_s"}
    )


# ---- each rule, case by case -------------------------------------------------------------
def edited(base: Trajectory, edit: Edit) -> Trajectory:
    data = base.model_dump(mode="json")
    edit(data)
    return Trajectory.model_validate(data)


def outcome(rule: object, trajectory: Trajectory) -> str | None:
    """The drop reason, "note:<code>" for a kept trajectory with a note, None for a keep."""
    result = rule.check(trajectory)  # type: ignore[attr-defined]
    if isinstance(result, Note):
        return f"note:{result.code}"
    return None if result is None else str(result.reason)


def test_the_user_may_say_what_the_package_says_a_revealed_signal_and_a_paraphrase(
    real: Real,
) -> None:
    rule = PrivateState(real.context())
    oracle = real.rollouts["oracle"]
    instruction = _first(oracle.model_dump(mode="json"), role="user", turn=0)["content"]

    def says(text: str) -> Edit:
        return lambda data: _first(data, role="user", turn=1).update(content=text)

    assert outcome(rule, real.rollouts["asker"]) is None  # the units signal, asked for
    assert outcome(rule, edited(oracle, says(f"Once more: {instruction}"))) is None
    paraphrase = "Managers read this, so keep the months in order and make the total clear."
    assert outcome(rule, edited(oracle, says(paraphrase))) is None
    quoted = edited(oracle, says(f"As you know: {_goal(real)}"))
    assert outcome(rule, quoted) == "private_state_quoted"
    assert outcome(PrivateState(), quoted) == "note:no_package"


def test_turns_are_checked_against_the_record_and_the_package(real: Real) -> None:
    oracle = real.rollouts["oracle"]
    alone, with_package = TurnConsistency(), TurnConsistency(real.context())
    assert outcome(alone, oracle) == "note:no_package"
    assert outcome(with_package, oracle) is None
    one_turn = edited(oracle, lambda d: d["environment"].update(turns=1))
    assert outcome(alone, one_turn) == "turn_beyond_count"
    assert outcome(with_package, one_turn) == "turn_count_mismatch"
    assert outcome(alone, edited(oracle, drop_turn_1)) == "turns_missing"

    def misplace(data: Data) -> None:
        data["interventions"][0]["at_message"] -= 1

    assert outcome(alone, edited(oracle, misplace)) == "intervention_without_message"


def ungated(real: Real) -> FilterContext:
    """The packages with no gate components (whatever the family marks as a gate)."""
    facts = {d: replace(f, gates=frozenset()) for d, f in real.facts.items()}
    return FilterContext(packages=facts)


def test_the_reward_is_what_the_verifiers_own_functions_give(real: Real) -> None:
    oracle = real.rollouts["oracle"]
    rule, alone = RewardConsistency(ungated(real)), RewardConsistency()

    def scores(code: float, reward: float, rubric: float | None = None) -> Edit:
        def edit(data: Data) -> None:
            data["verification"]["components"]["monthly_precipitation"] = 0.0  # weight 3 of 12
            data["verification"].update(code_score=code, reward=reward, rubric_score=rubric)
            data["verification"].update(passed=False, judge_ran=rubric is not None)

        return edit

    assert outcome(rule, edited(oracle, scores(0.75, 0.75))) is None
    assert outcome(rule, edited(oracle, scores(0.75, 0.0))) is None  # a red line capped it
    unweighted = 6 / 7
    assert outcome(rule, edited(oracle, scores(unweighted, unweighted))) == "code_score_disagrees"
    assert outcome(alone, edited(oracle, scores(unweighted, unweighted))) == "note:no_package"
    assert outcome(rule, edited(oracle, scores(0.75, 0.8))) == "reward_disagrees"
    # with a rubric: R is the weighted geometric mean of code and rubric scores
    geometric = 0.75**0.7 * 0.36**0.3
    assert outcome(rule, edited(oracle, scores(0.75, geometric, 0.36))) is None
    assert outcome(rule, edited(oracle, scores(0.75, (0.75 + 0.36) / 2, 0.36))) == (
        "reward_disagrees"
    )
    assert outcome(alone, edited(oracle, scores(0.75, 0.76, 0.36))) == "reward_disagrees"


def test_a_short_gate_bounds_the_reward_instead(real: Real) -> None:
    oracle = real.rollouts["oracle"]
    facts = ungated(real).packages[oracle.environment.digest]
    gated = FilterContext({facts.digest: replace(facts, gates=frozenset({"wettest_month"}))})

    def short_gate(reward: float) -> Edit:
        def edit(data: Data) -> None:
            data["verification"]["components"]["wettest_month"] = 0.0  # weight 2 of 12
            data["verification"].update(code_score=10 / 12, reward=reward, passed=False)

        return edit

    assert outcome(RewardConsistency(gated), edited(oracle, short_gate(5 / 12))) is None
    assert outcome(RewardConsistency(gated), edited(oracle, short_gate(0.9))) == (
        "reward_disagrees"
    )


def test_verdicts_agree_with_their_reasons() -> None:
    rule = VerdictConsistency()
    blank = make.variant(
        make.solved(), verification={"valid": False, "reward": None, "invalid_reason": "  "}
    )
    assert outcome(rule, blank) == "invalid_without_reason"
    assert outcome(rule, make.verifier_crashed()) is None
    harbor_zero = make.variant(
        make.solved(),
        environment={**make.solved().environment.model_dump(), "family": None},
        verification={"valid": True, "reward": 0.0},
    )
    assert outcome(rule, harbor_zero) == "note:no_package"  # a plain Harbor task's verdict


def test_the_final_workspace_is_recomputed_where_it_is_stored(real: Real, tmp_path: Path) -> None:
    oracle = real.rollouts["oracle"]
    copy = tmp_path / "store" / oracle.id
    shutil.copytree(real.store / oracle.id, copy)
    stored = FinalWorkspace(context=FilterContext(workspaces=(tmp_path / "store",)))
    assert outcome(stored, oracle) is None
    assert outcome(FinalWorkspace(), oracle) == "note:no_stored_workspace"
    (copy / "summary.json").write_text("{}")
    assert outcome(stored, oracle) == "final_digest_mismatch"
    (copy / "summary.json").unlink()
    assert outcome(stored, oracle) == "final_files_differ"
    named = FilterContext(workspace_of={oracle.id: real.store / oracle.id})
    assert outcome(FinalWorkspace(context=named), oracle) is None  # as the collect pod maps it


def test_the_file_limit_is_the_engines() -> None:
    assert RolloutLimits().workspace_disk_mb * 1024 * 1024 == DEFAULT_MAX_FILE_BYTES


def test_an_agent_may_say_a_short_thing_a_tool_said() -> None:
    def says(text: str) -> Edit:
        return lambda data: data["messages"][-1].update(content=text)

    base = make.solved()
    tool_output = base.messages[3].content  # "region,sales\nnorth,10\n", 21 characters
    assert outcome(AgentEcho(), edited(base, says("written"))) is None
    assert outcome(AgentEcho(), edited(base, says(tool_output))) == "agent_echoes_tool"


def test_the_first_copy_is_kept_and_duplicates_can_be_allowed() -> None:
    first, again = make.solved(), make.solved()
    rekeyed = make.variant(first, key={**first.key.model_dump(), "sample": 9})
    pipeline = FilterPipeline()
    verdicts = [pipeline.admit(t) for t in (first, again, rekeyed)]
    assert verdicts[0] is None
    assert [v.drop.reason for v in verdicts[1:] if v] == ["duplicate_id", "duplicate_content"]
    allowing = FilterPipeline(FilterSettings(skip_rules=["unique_records"]))
    assert [allowing.admit(t) for t in (first, again, rekeyed)] == [None, None, None]
    assert content_digest(first) == content_digest(rekeyed) != content_digest(make.failed())
    assert UniqueRecords().see("a", "") is None


def test_copies_in_a_file_are_found_from_their_lines(tmp_path: Path) -> None:
    first = make.solved()
    rekeyed = make.variant(first, key={**first.key.model_dump(), "sample": 9})
    lines = [dump_line(t) for t in (first, make.failed(), rekeyed, first)]
    assert content_digest(first, lines[0]) == content_digest(rekeyed, lines[2])
    assert content_digest(first, lines[0]).startswith("line:")  # not serialized again
    (tmp_path / "t.jsonl").write_text("".join(lines))
    report = filter_files([tmp_path / "t.jsonl"], tmp_path / "kept.jsonl", workers=2)
    assert report.stages[0].reasons == {"duplicate_content": 1, "duplicate_id": 1}
    assert (tmp_path / "kept.jsonl").read_text() == lines[0] + lines[1]


# ---- the command line -------------------------------------------------------------------
def test_the_command_checks_against_packages_and_stored_workspaces(
    real: Real, corpus: Corpus, tmp_path: Path
) -> None:
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(corpus.lines()) + "{torn line\n")
    report = tmp_path / "funnel.json"
    args = ["filter", str(source), "--out", str(tmp_path / "kept.jsonl"), "--report", str(report)]
    context = [f"--packages={p}" for p in real.packages] + ["--workspaces", str(real.store)]
    result = CliRunner().invoke(app, [*args, *context])
    assert result.exit_code == 0, result.output
    assert "1 unreadable line(s) skipped (json_error 1)" in result.output
    funnel = FunnelReport.model_validate_json(report.read_text())
    (tmp_path / "in-process").mkdir()
    expected = run_filter(corpus, tmp_path / "in-process", real.context()).report
    assert funnel.reason_counts() == {**expected.reason_counts(), "json_error": 1}
    assert funnel.kept == len(corpus.clean)
    strict = CliRunner().invoke(app, [*args, "--strict"])
    assert strict.exit_code == 2
    assert "corpus.jsonl" in strict.output and "not JSON" in strict.output
