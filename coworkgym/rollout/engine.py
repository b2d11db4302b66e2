"""The rollout engine: one (package, harness, policy, sample) → one ``Trajectory``.

    s0 ──materialize──▶ workspace (a fresh temp dir) ──mounted alone──▶ agent sandbox
    harness ─▶ RolloutEpisode.execute ─▶ tools (bubblewrap: the workspace, nothing else)
                            └─▶ user simulator (this process: .user/, .patch/)
    after the episode: a fresh verifier sandbox on a *copy* of the workspace (+ the judge)

``RolloutEpisode`` implements the harness-facing ``Episode``: it keeps the record (every
message with its source, user interventions, workspace events and digests), counts steps
against ``max_steps`` and the clock against the wall-clock limit, and decides how the
rollout ended. The engine wires it up: workspace, sandbox, user voice, the LLM gateway
(upstream keys stay in this process; the harness gets a per-rollout token and budget),
verification, and the ``Termination``.

Nothing a policy does raises out of ``RolloutEngine.run``: a crashed harness, a failed
endpoint or a broken sandbox becomes a trajectory with that termination and an *invalid*
verification (never a 0), so a batch goes on.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

import openai
import structlog

from ..llm.gateway import Gateway, Route
from ..llm.judge import RubricJudge
from ..llm.tools import ToolBox
from ..package.limits import workspace_symlink_problems
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..runtime.workspace import materialize
from ..sandbox import Sandbox, default_sandbox
from . import adapters as _adapters  # noqa: F401 - registers mini-swe-agent, openai-agents
from . import agent_tools
from . import replay as _replay  # noqa: F401 - registers the oracle and nop harnesses
from . import shell_patch as _shell_patch  # noqa: F401 - registers shell-patch
from . import tool_calling as _tool_calling  # noqa: F401 - registers tool-calling
from .harness import (
    AGENT_LANE_MARKER,
    ASK_USER_TOOL,
    FINISH_TOOL,
    HarnessError,
    PolicyConfig,
    ToolOutput,
    get_harness,
)
from .trajectory import (
    EnvironmentRef,
    FileChange,
    FileDigest,
    FinishReason,
    Message,
    PolicyRef,
    RolloutKey,
    SimulatorFault,
    Termination,
    TerminationReason,
    Timings,
    TokenRecord,
    ToolCall,
    Trajectory,
    Usage,
    UserIntervention,
    VerificationRecord,
    WorkspaceEvent,
    now,
)
from .user import USER_LANE_MARKER, Due, Fired, LLMVoice, UserSimulator, Voice
from .verify import verify_rollout

log = structlog.get_logger(__name__)

# Ends that leave nothing to verify: the record is incomplete for reasons outside the policy.
UNVERIFIABLE: frozenset[TerminationReason] = frozenset(
    {"model_error", "harness_crash", "infrastructure_error", "simulator_fault"}
)


DeferredVerifier = Callable[[EnvironmentPackage, Path, str, dict[str, Any]], VerificationRecord]


@dataclass(frozen=True)
class Endpoint:
    """An upstream OpenAI-compatible model. ``api_key`` stays in this process (the
    gateway's route); harnesses and sandboxes see only gateway tokens."""

    base_url: str
    model: str
    api_key: str = field(default="EMPTY", repr=False)
    temperature: float = 0.7


@dataclass(frozen=True)
class RolloutLimits:
    timeout_s: float | None = None  # None: the package's [agent] timeout_sec, else 1800
    max_tool_calls: int = 500  # a harness that loops on tool calls without model calls
    tool_memory_mb: int = 2048
    # what the agent's shell may leave in the workspace (each file, and in all): beyond it
    # the call is killed and says so; the host's disk is never the agent's to fill
    workspace_disk_mb: int = 2048
    workspace_max_files: int = 20_000
    token_budget: int = 2_000_000  # per rollout, through the gateway

    def timeout_for(self, pkg: EnvironmentPackage) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        return float(pkg.config.agent.timeout_sec or 1800.0)


@dataclass(frozen=True)
class Reference:
    """The package's reference solution: for the ``oracle`` harness only (see there)."""

    files: dict[str, bytes]
    outputs: list[str]
    env: dict[str, str] = field(default_factory=dict)  # the task's [solution.env]


# ---- the episode ------------------------------------------------------------------------
class RolloutEpisode:
    """What a harness drives (``harness.Episode``); also the trajectory's recorder."""

    def __init__(
        self,
        pkg: EnvironmentPackage,
        workspace: Path,
        workdir: str,
        toolbox: ToolBox,
        user: UserSimulator,
        *,
        max_steps: int,
        limits: RolloutLimits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pkg = pkg
        self.workspace = workspace
        self._workdir = workdir
        self.toolbox = toolbox
        self.user = user
        self.max_steps = max_steps
        self.limits = limits
        self.clock = clock
        self.started = clock()
        self.deadline = self.started + limits.timeout_for(pkg)
        self.messages: list[Message] = []
        self.interventions: list[UserIntervention] = []
        self.events: list[WorkspaceEvent] = []
        self.claimed: list[str] = []
        self.usage = Usage()
        self.steps = 0
        self.finished = False  # the agent ended its turn after the user's last one
        self.infrastructure: str | None = None
        self.simulator_failure: str | None = None
        self._due: Due | None = None
        self._turn_digests = agent_tools.digests(workspace)
        self.initial = list(self._turn_digests.values())
        self._record("system", "system", self.system_prompt)
        self._record("user", "user", self.instruction)

    # ---- Episode ---------------------------------------------------------------------
    @property
    def instruction(self) -> str:
        return self.pkg.instruction

    @property
    def workdir(self) -> str:
        return self._workdir

    @property
    def system_prompt(self) -> str:
        tools = ", ".join(self.toolbox.tools)
        return (
            f"{AGENT_LANE_MARKER} working for a user on the files in {self._workdir} (your "
            f"working directory). Act only through your tools ({tools}, {ASK_USER_TOOL}, "
            f"{FINISH_TOOL}); there is no network. If something essential is unclear, ask "
            f"the user with {ASK_USER_TOOL}. When you have done what the user asked, call "
            f"{FINISH_TOOL} with a short summary and the files you produced; the user may "
            "come back with changes, which you then handle the same way."
        )

    def tool_schemas(self) -> list[dict[str, Any]]:
        return agent_tools.episode_tool_specs(self.toolbox)

    def record_agent(
        self,
        content: str,
        tool_calls: list[ToolCall],
        tokens: TokenRecord | None = None,
        finish_reason: str | None = None,
    ) -> None:
        self.steps += 1
        known = finish_reason if finish_reason in get_args(FinishReason) else None
        self._record(
            "assistant",
            "agent",
            content or "",
            tool_calls=tool_calls,
            tokens=tokens,
            finish_reason=known,
        )

    def execute(self, call: ToolCall) -> ToolOutput:
        if (over := self._over_for_calls(call)) is not None:
            return over
        self.usage.tool_calls += 1
        source = "tool"
        if call.name == FINISH_TOOL:
            output = self._finish(call)
        elif call.name == ASK_USER_TOOL:
            output, source = self._ask(call), "user"
        else:
            output = self._tool(call)
        self.usage.tool_errors += output.is_error
        self._record_tool(call, output, source=source)
        if call.name not in (FINISH_TOOL, ASK_USER_TOOL) and self._due is None:
            self._due = self.user.after_tool_call()
        return output

    def reject(self, call: ToolCall, error: str) -> ToolOutput:
        if (over := self._over_for_calls(call)) is not None:
            return over
        self.usage.tool_calls += 1
        self.usage.malformed_tool_calls += 1
        self.usage.tool_errors += 1
        output = ToolOutput(error, True)
        self._record_tool(call, output, source="tool")
        if self._due is None:
            self._due = self.user.after_tool_call()
        return output

    def _over_for_calls(self, call: ToolCall) -> ToolOutput | None:
        """The answer to a call once the episode is over (recorded), else None. The calls of
        the last permitted model call still run: max_steps stops the next one."""
        blocked = self.over_reason()
        if (blocked is not None and blocked != "max_steps") or self._tool_calls_spent():
            output = ToolOutput(f"error: the episode is over ({blocked or 'max_steps'})", True)
            self._record_tool(call, output, source="tool")
            return output
        return None

    def end_turn(self, content: str = "") -> None:
        # like finish, a reply in the last permitted model call still ends the turn
        if self._due is None and self.over_reason() in (None, "max_steps"):
            self._end_turn(claimed_done=False)

    def pending_user_message(self) -> str | None:
        if self._due is None or self.simulator_failure is not None:
            return None
        due, self._due = self._due, None
        # what the agent changed in the turn that ends here, before the user's patch lands
        self._files_changed(agent_tools.digests(self.workspace))
        try:
            fired = self.user.fire(due)
        except Exception as exc:  # the simulator's own failure: the episode cannot go on
            self.simulator_failure = f"turn {due.patch.turn}: {type(exc).__name__}: {exc}"
            self.user.fault("simulator_error", self.simulator_failure, turn=due.patch.turn)
            log.error("user simulator failed", error=self.simulator_failure)
            return None
        return self._deliver(fired).message

    @property
    def done(self) -> bool:
        return self.over_reason() is not None

    # ---- privileged: the oracle only -------------------------------------------------
    def reference_solution(self) -> Reference:
        """The reference solution, for the ``oracle`` harness (a privileged replay, not a
        policy). It is handed over in this process; it never enters the workspace, so no
        other harness's sandbox can see it."""
        outputs = [a.path for a in self.pkg.artifacts.outputs] if self.pkg.artifacts else []
        return Reference(self.pkg.under("solution"), outputs, dict(self.pkg.config.solution.env))

    # ---- ending ------------------------------------------------------------------------
    def over_reason(self) -> TerminationReason | None:
        if self.infrastructure is not None:
            return "infrastructure_error"
        if self.simulator_failure is not None:
            return "simulator_fault"
        if self.finished:
            return "agent_done"
        if self.clock() > self.deadline:
            return "timeout"
        if self.steps >= self.max_steps or self._tool_calls_spent():
            return "max_steps"
        return None

    def _tool_calls_spent(self) -> bool:
        return self.usage.tool_calls >= self.limits.max_tool_calls

    def termination(self, error: BaseException | None) -> Termination:
        if isinstance(error, HarnessError):
            return Termination(reason=error.reason, detail=error.detail)
        if error is not None:
            return Termination(reason="harness_crash", detail=f"{type(error).__name__}: {error}")
        reason = self.over_reason()
        if reason == "infrastructure_error":
            return Termination(reason=reason, detail=self.infrastructure or "")
        if reason == "simulator_fault":
            return Termination(reason=reason, detail=self.simulator_failure or "")
        if reason == "timeout":
            return Termination(reason=reason, detail=f"{self.limits.timeout_for(self.pkg):g}s")
        if reason == "max_steps":
            return Termination(reason=reason, detail=f"{self.steps} model calls")
        if reason == "agent_done":
            return Termination(reason=reason)
        unread = " with a user message unread" if self._due is not None else ""
        return Termination(
            reason="harness_crash",
            detail=f"the harness stopped before the episode was done{unread}",
        )

    def close_record(self) -> list[FileDigest]:
        """The last turn's file changes and the final digests."""
        final = agent_tools.digests(self.workspace)
        self._files_changed(final)
        return list(final.values())

    # ---- the tools -------------------------------------------------------------------
    def _tool(self, call: ToolCall) -> ToolOutput:
        tool = self.toolbox.tools.get(call.name)
        arguments = call.arguments
        try:
            raw = json.loads(arguments or "{}")
            if tool is None or not isinstance(raw, dict):
                raise ValueError
            tool.args.model_validate(raw)
        except ValueError:  # includes pydantic's ValidationError and bad JSON
            self.usage.malformed_tool_calls += 1
            result = self.toolbox.dispatch(call.name, arguments)  # its error says what is wrong
            return ToolOutput(result.text, not result.ok)
        if call.name == "shell":  # never past the rollout's own deadline
            remaining = max(1.0, self.deadline - self.clock())
            raw["timeout_s"] = min(float(raw.get("timeout_s", 120.0)), remaining, 600.0)
            arguments = json.dumps(raw)
        try:
            result = self.toolbox.dispatch(call.name, arguments)
        except Exception as exc:  # the sandbox itself failed: nothing the policy did
            self.infrastructure = f"{call.name} could not run: {type(exc).__name__}: {exc}"
            log.error("agent sandbox failed", error=self.infrastructure)
            return ToolOutput(f"error: infrastructure failure ({exc})", True)
        return ToolOutput(result.text, not result.ok)

    def _finish(self, call: ToolCall) -> ToolOutput:
        try:
            raw = json.loads(call.arguments or "{}")
            if not isinstance(raw, dict):
                raise ValueError("not an object")
        except ValueError:
            self.usage.malformed_tool_calls += 1
            raw = {}
        delivered = raw.get("deliverables") or []
        if isinstance(delivered, list):
            for path in delivered:
                if isinstance(path, str) and path not in self.claimed:
                    self.claimed.append(path)
        if self._due is not None:
            return ToolOutput("Not finished yet: the user has a new message for you (it follows).")
        self._end_turn(claimed_done=True)
        if self.finished:
            return ToolOutput("Thank you; the user has nothing more to ask.")
        return ToolOutput("Turn ended; the user replies (it follows).")

    def _ask(self, call: ToolCall) -> ToolOutput:
        try:
            raw = json.loads(call.arguments or "{}")
            question = raw.get("question") if isinstance(raw, dict) else None
            if not isinstance(question, str) or not question.strip():
                raise ValueError
        except ValueError:
            self.usage.malformed_tool_calls += 1
            return ToolOutput('error: ask_user needs {"question": "<your question>"}', True)
        try:
            answer = self.user.answer(question)
        except Exception as exc:  # the simulator's own failure, not the policy's
            self.simulator_failure = f"answering: {type(exc).__name__}: {exc}"
            self.user.fault("simulator_error", self.simulator_failure)
            return ToolOutput("error: the user could not answer", True)
        self.interventions.append(
            UserIntervention(
                kind="answer",
                turn=self.user.turn,
                at_message=len(self.messages),  # the tool message that carries it
                message=answer.text,
                revealed=answer.revealed,
                speaker=answer.speaker,
            )
        )
        return ToolOutput(answer.text)

    def _end_turn(self, *, claimed_done: bool) -> None:
        self._due = self.user.after_agent_turn(claimed_done=claimed_done)
        if self._due is None:
            self.finished = True

    # ---- the record ------------------------------------------------------------------
    def _deliver(self, fired: Fired) -> Fired:
        at = len(self.messages)
        if fired.files or fired.invalidates:
            self.events.append(
                WorkspaceEvent(
                    kind="patch_applied",
                    turn=fired.patch.turn,
                    at_message=at,
                    files=fired.files,
                    invalidates=fired.invalidates,
                )
            )
        self._turn_digests = agent_tools.digests(self.workspace)
        self.interventions.append(
            UserIntervention(
                kind="turn",
                turn=fired.patch.turn,
                at_message=at,
                message=fired.message,
                trigger=fired.trigger,
                trigger_detail=fired.detail,
                patch_kind=fired.patch.kind,
                speaker=fired.speaker,
            )
        )
        self._record("user", "user", fired.message)
        return fired

    def _files_changed(self, now_digests: dict[str, FileDigest]) -> None:
        """What the agent changed since the last turn boundary (a snapshot diff)."""
        change = agent_tools.diff(self._turn_digests, now_digests)
        before, after = self._turn_digests, now_digests
        files = [
            *(
                FileChange(path=p, change="created", sha256_after=after[p].sha256)
                for p in change.created
            ),
            *(
                FileChange(
                    path=p,
                    change="modified",
                    sha256_before=before[p].sha256,
                    sha256_after=after[p].sha256,
                )
                for p in change.modified
            ),
            *(
                FileChange(path=p, change="deleted", sha256_before=before[p].sha256)
                for p in change.deleted
            ),
        ]
        if files:
            self.events.append(
                WorkspaceEvent(
                    kind="files_changed",
                    turn=self.user.turn,
                    at_message=len(self.messages),
                    files=files,
                )
            )
        self._turn_digests = now_digests

    def _record_tool(self, call: ToolCall, output: ToolOutput, *, source: str) -> None:
        self._record(
            "tool",
            source,
            output.text,
            tool_call_id=call.id or f"call_{len(self.messages)}",
            is_error=output.is_error,
        )

    def _record(self, role: str, source: str, content: str, **extra: Any) -> None:
        self.messages.append(
            Message(
                role=role,
                source=source,
                content=content,
                turn=self.user.turn,
                elapsed_s=round(max(0.0, self.clock() - self.started), 3),
                **extra,
            )
        )


# ---- the engine -------------------------------------------------------------------------
@dataclass
class RolloutEngine:
    """Runs rollouts on this machine. Thread-safe: one engine serves parallel workers
    (the gateway is shared; each rollout gets its own token, budget and workspace)."""

    sandbox: Sandbox | None = None
    runtime: LocalRuntime | None = None
    limits: RolloutLimits = field(default_factory=RolloutLimits)
    user_endpoint: Endpoint | None = None  # None: the scripted user
    judge_endpoint: Endpoint | None = None  # None: code checks only (R = s)
    simulator: type[UserSimulator] = UserSimulator  # the user's policy (a subclass may differ)
    request_timeout_s: float = 180.0
    max_retries: int = 3
    # The rollout's workspace folder (empty), instead of one in a temporary folder: for a
    # pod whose agent container mounts that same volume at the workdir. One rollout at a
    # time then.
    workspace_dir: Path | None = None
    # Verification elsewhere: called instead of verifying here, with (package, workspace,
    # workdir, claims), before the workspace is removed (a cluster copies it out for a
    # separate verify pod and records the verdict later).
    verifier: DeferredVerifier | None = None
    _gateway: Gateway | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.sandbox = self.sandbox or default_sandbox()
        self.runtime = self.runtime or LocalRuntime(self.sandbox)

    # ---- the gateway ---------------------------------------------------------------
    def gateway(self) -> Gateway:
        """One gateway for every rollout of this engine, started on first need."""
        with self._lock:  # parallel workers may all need it first at once
            if self._gateway is None:
                self._gateway = Gateway(
                    token_budget=self.limits.token_budget,
                    # the gateway waits on the upstream at least as long as its callers do
                    upstream_timeout_s=max(300.0, self.request_timeout_s),
                ).start()
            return self._gateway

    def close(self) -> None:
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None

    def __enter__(self) -> RolloutEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client(self, scope: str, role: str, endpoint: Endpoint) -> openai.OpenAI:
        route = Route(base_url=endpoint.base_url, model=endpoint.model, api_key=endpoint.api_key)
        token = self.gateway().grant(scope, role, route)
        return openai.OpenAI(  # closed by the rollout that asked for it
            base_url=self.gateway().url,
            api_key=token,
            max_retries=self.max_retries,
            timeout=self.request_timeout_s,
            http_client=openai.DefaultHttpxClient(trust_env=False),  # loopback, never a proxy
        )

    # ---- one rollout ---------------------------------------------------------------
    def run(
        self,
        pkg: EnvironmentPackage,
        harness: str,
        policy: PolicyConfig,
        sample: int = 0,
        *,
        uri: str | None = None,
        api_key: str = "EMPTY",
    ) -> Trajectory:
        """Roll ``harness`` driving ``policy`` out in ``pkg``. ``policy.base_url`` is the
        upstream endpoint (the harness is handed the gateway instead); ``api_key`` is its
        key, which stays here. Raises ValueError for a package it cannot roll out (see
        ``unsupported``) before doing anything."""
        why = unsupported(pkg)
        if why:
            raise ValueError(f"{pkg.name}: {why}")
        key = RolloutKey(
            package_digest=pkg.digest(), harness=harness, model=policy.model, sample=sample
        )
        started = now()
        ref = environment_ref(pkg, uri)
        policy_ref = PolicyRef(
            harness=harness,
            model=policy.model,
            base_url=policy.base_url,
            sampling=policy.sampling() if policy.base_url else {},  # a replay samples nothing
        )
        try:
            with tempfile.TemporaryDirectory(prefix="cwg-rollout-") as tmp:
                return self._run(pkg, harness, policy, key, ref, policy_ref, Path(tmp), api_key)
        except Exception as exc:  # never lose a batch to one rollout
            log.exception("rollout failed outside the policy", rollout=key.id)
            detail = f"{type(exc).__name__}: {exc}"
            return Trajectory(
                key=key,
                environment=ref,
                policy=policy_ref,
                termination=Termination(reason="infrastructure_error", detail=detail),
                verification=VerificationRecord(
                    valid=False, invalid_reason=f"infrastructure: {detail}"
                ),
                timings=Timings(started_at=started, finished_at=now()),
            )

    def _run(
        self,
        pkg: EnvironmentPackage,
        harness_name: str,
        policy: PolicyConfig,
        key: RolloutKey,
        ref: EnvironmentRef,
        policy_ref: PolicyRef,
        tmp: Path,
        api_key: str,
    ) -> Trajectory:
        workspace = self.workspace_dir or tmp / "workspace"
        scopes = [key.id]
        clients: list[openai.OpenAI] = []
        try:
            return self._episode(
                pkg, harness_name, policy, key, ref, policy_ref, workspace, api_key, scopes, clients
            )
        finally:
            for client in clients:
                client.close()
            if self._gateway is not None:
                for scope in scopes:
                    self._gateway.revoke_environment(scope)

    def _episode(
        self,
        pkg: EnvironmentPackage,
        harness_name: str,
        policy: PolicyConfig,
        key: RolloutKey,
        ref: EnvironmentRef,
        policy_ref: PolicyRef,
        workspace: Path,
        api_key: str,
        scopes: list[str],
        clients: list[openai.OpenAI],
    ) -> Trajectory:
        assert self.sandbox is not None and self.runtime is not None
        started = now()
        workdir = materialize(pkg, workspace).workdir
        interfaces = agent_tools.interfaces_of(pkg, workdir)
        mounts = agent_tools.agent_mounts(workspace, workdir, interfaces)
        toolbox = agent_tools.agent_toolbox(
            mounts,
            self.sandbox,
            interfaces,
            memory_mb=self.limits.tool_memory_mb,
            disk_mb=self.limits.workspace_disk_mb,
            max_files=self.limits.workspace_max_files,
            task_env=dict(pkg.config.environment.env),
        )
        voice: Voice | None = None
        if self.user_endpoint is not None:
            scopes.append(f"{key.id}/user")
            client = self._client(scopes[-1], "user", self.user_endpoint)
            clients.append(client)
            voice = LLMVoice(
                client, self.user_endpoint.model, temperature=self.user_endpoint.temperature
            )
        user = self.simulator(pkg, workspace, voice)
        episode = RolloutEpisode(
            pkg, workspace, workdir, toolbox, user, max_steps=policy.max_steps, limits=self.limits
        )
        driven = policy
        if policy.base_url is not None:  # the harness talks to the gateway, with a token
            upstream = Endpoint(policy.base_url, policy.model, api_key, policy.temperature)
            client_token = self.gateway().grant(
                key.id, "agent", Route(upstream.base_url, upstream.model, upstream.api_key)
            )
            driven = replace(policy, base_url=self.gateway().url, api_key=client_token)
        error: BaseException | None = None
        clock = time.perf_counter()
        try:
            get_harness(harness_name).run(episode, driven)
        except Exception as exc:
            error = exc
            if not isinstance(exc, HarnessError):
                log.warning("harness crashed", rollout=key.id, error=repr(exc))
        agent_s = time.perf_counter() - clock - user.seconds
        termination = episode.termination(error)
        final = episode.close_record()
        faults = list(user.faults)
        # Planned turns unsaid although the agent finished within its budget: the user's
        # fault. (Any other end has its own cause on record: a limit, a crash.)
        if user.remaining > 0 and termination.reason == "agent_done":
            faults.append(
                SimulatorFault(
                    kind="stopped_early",
                    turn=user.turn,
                    detail=f"{user.remaining} of {user.planned} planned turns never said",
                )
            )
        usage = episode.usage
        if policy.base_url is not None:
            spent = self.gateway().usage(key.id, "agent")
            usage = usage.model_copy(
                update={
                    "requests": spent.requests,
                    "prompt_tokens": spent.prompt_tokens,
                    "completion_tokens": spent.completion_tokens,
                }
            )
        removed = agent_tools.remove_special_files(workspace)
        if removed:
            log.warning("removed special files the agent left", rollout=key.id, paths=removed)
        claims = {
            "tool_calls": [
                {"name": c.name, "arguments": c.arguments}
                for m in episode.messages
                for c in m.tool_calls
            ],
            "claimed_files": episode.claimed,
        }
        clock = time.perf_counter()
        if termination.reason in UNVERIFIABLE:
            verification = VerificationRecord(
                valid=False,
                invalid_reason=f"rollout ended by {termination.reason}: {termination.detail}"[:500],
            )
        else:
            judge = None
            if self.judge_endpoint is not None and pkg.verifier and pkg.verifier.rubric:
                scopes.append(f"{key.id}/judge")
                clients.append(self._client(scopes[-1], "judge", self.judge_endpoint))
                judge = RubricJudge(clients[-1], self.judge_endpoint.model)
            if self.verifier is not None:
                verification = self.verifier(pkg, workspace, workdir, claims)
            else:
                verification = verify_rollout(self.runtime, pkg, workspace, workdir, claims, judge)
        verify_s = time.perf_counter() - clock
        return Trajectory(
            key=key,
            environment=ref,
            policy=policy_ref,
            tools=episode.tool_schemas(),
            messages=episode.messages,
            interventions=episode.interventions,
            workspace_events=episode.events,
            simulator_faults=faults,
            claimed_deliverables=episode.claimed,
            initial_workspace=episode.initial,
            final_workspace=final,
            verification=verification,
            termination=termination,
            usage=usage,
            timings=Timings(
                started_at=started,
                finished_at=now(),
                agent_s=round(max(0.0, agent_s), 3),
                user_s=round(user.seconds, 3),
                verify_s=round(verify_s, 3),
            ),
        )


def unsupported(pkg: EnvironmentPackage) -> str | None:
    """Why the engine cannot roll this package out, or None."""
    if problems := workspace_symlink_problems(pkg.symlinks):
        return "; ".join(problems)
    if pkg.is_multi_step:
        return (
            "a Harbor multi-step task ([[steps]] without Cowork turns) is not supported by "
            "the rollout engine yet; roll its steps out as separate tasks"
        )
    return None


def environment_ref(pkg: EnvironmentPackage, uri: str | None) -> EnvironmentRef:
    cowork = pkg.config.cowork
    labels: dict[str, Any] = {}
    if cowork is not None and cowork.taxonomy is not None:
        labels = cowork.taxonomy.model_dump(mode="json", exclude_none=True)
    return EnvironmentRef(
        name=pkg.name,
        digest=pkg.digest(),
        uri=uri,
        family=cowork.family if cowork is not None else None,
        labels=labels,
        turns=1 + len(pkg.patches),
    )


__all__ = [
    "AGENT_LANE_MARKER",
    "USER_LANE_MARKER",
    "Endpoint",
    "Reference",
    "RolloutEngine",
    "RolloutEpisode",
    "RolloutLimits",
    "environment_ref",
    "unsupported",
]
