"""The LLM backend: Builder and Verifier Constructor as tool-using agents.

Each stage runs one agent (``coworkgym.llm.agent``) whose tools act in the role's own
sandbox, on the role's own directories:

    Builder:               /build rw (its output)   /app rw (scratch s0)   /resources ro
    Verifier Constructor:  /verifier rw (its output) /builder ro (Builder's output,
                           reference completion, final inputs)          /app rw (scratch)

The agent writes files in a fixed layout (``coworkgym.llm.layout``) and calls ``submit``;
submit validates them with the package's pydantic models and, for the Builder, grounds the
reference solution by executing it turn by turn (the procedural backend's ``ground``); for
the Verifier Constructor it runs the verifier on the reference completion and on the
untouched workspace. Problems go back to the agent as a tool error, within its turn budget.
The outputs are the same ``BuilderOutput`` / ``VerifierOutput`` the procedural backend
makes, so both go through the same Issue Detector.

In a stage pod (``in_place``) nothing can be bind-mounted: the role's directories are the
pod's own emptyDirs at those very paths (/build, /app, /resources; /builder, /verifier,
/app), so a path inside a shell command means what it says. Elsewhere they are temporary
directories, mounted by the sandbox.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..detector import IssueDetector
from ..llm import prompts
from ..llm.layout import LayoutError, export_builder, export_verifier, load_builder, load_verifier
from ..llm.settings import LLMSettings
from ..llm.tools import Args, RoleMounts, Tool, ToolBox, ToolError, ToolResult, standard_tools
from ..package.assemble import BuilderOutput, VerifierOutput, assemble
from ..runtime.local import LocalRuntime, VerifyOutcome
from ..runtime.workspace import write_files
from ..sandbox import Mount, Sandbox
from ..spec import EnvironmentSpec, RoleBackend
from .base import Builder, RoleError, RoleRequest, VerifierConstructor
from .procedural import ProceduralBuilder, ProceduralVerifierConstructor

if TYPE_CHECKING:  # the openai client is the `llm` extra: procedural-only installs lack it
    from ..llm.agent import AgentUsage
    from ..llm.session import LLMSession, RoleSession

WORKDIR = "/app"  # where the package's workspace lives (templates.WORKDIR)


class SubmitArgs(Args):
    summary: str = ""


class TryArgs(Args):
    workspace: str = Field(
        "",
        description="also score this workspace state, a directory you built (say /app/stale: "
        "a copy of /builder/reference with a later turn ignored, a deliverable removed, "
        "the free text blanked); its score and every component are shown",
    )


def _resources_dir() -> Path:
    # the bundled data (a namespace package on disk: importlib.resources would hand back a
    # MultiplexedPath, which cannot be bind-mounted)
    return Path(__file__).resolve().parent.parent / "resources"


def copy_into(source: Path, target: Path) -> None:
    """Copy what ``source`` holds into the existing directory ``target``, leaving the mode
    and times of ``target`` itself alone: in a stage pod it is an emptyDir's mount point,
    which the role's non-root user may not chmod or touch (copytree copies them, EPERM)."""
    for item in source.iterdir():
        if item.is_dir():
            shutil.copytree(item, target / item.name, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target / item.name)


@contextmanager
def role_dirs(prefix: str, names: tuple[str, ...], in_place: bool) -> Iterator[list[Path]]:
    """The role's directories, fresh: /<name> itself in place (a stage pod's emptyDirs),
    else under a temporary directory."""
    if in_place:
        dirs = [Path("/") / name for name in names]
        missing = [str(d) for d in dirs if not d.is_dir()]
        if missing:
            raise RoleError(f"this pod has no {', '.join(missing)} (the stage Job mounts them)")
        for d in dirs:
            for child in d.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        yield dirs
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        dirs = [Path(tmp) / name for name in names]
        for d in dirs:
            d.mkdir()
        yield dirs


def _problems(title: str, problems: list[str]) -> ToolResult:
    listed = "\n".join(f"- {p}" for p in problems)
    return ToolResult(f"error: {title}; fix these and call submit again:\n{listed}", ok=False)


class _Role:
    role: str

    def __init__(
        self,
        session: RoleSession,
        runtime: LocalRuntime | None = None,
        sandbox: Sandbox | None = None,
        *,
        in_place: bool = False,
    ) -> None:
        self.session = session
        self._runtime = runtime
        self._sandbox = sandbox
        self.in_place = in_place
        self.usage: AgentUsage | None = None  # the model calls of the last run, once it ran

    @property
    def runtime(self) -> LocalRuntime:
        if self._runtime is None:
            self._runtime = LocalRuntime()
        return self._runtime

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or self.runtime.sandbox

    def _run_agent(
        self,
        request: RoleRequest,
        mounts: RoleMounts,
        extra: list[Tool[Any]],
        system: str,
        task: str,
    ) -> None:
        from ..llm.agent import Agent  # needs the `llm` extra (openai)

        tools = ToolBox.of([*standard_tools(mounts, self.sandbox), *extra])
        with self.session.client(request.name, self.role) as client:
            agent = Agent(
                client,
                tools,
                self.session.agent_config(self.role),
                name=f"{self.role}/{request.name}",
            )
            self.usage = agent.usage  # counted as it goes: a failed run's calls count too
            agent.run(system, task)


class LLMBuilder(_Role):
    role = "builder"

    def build(self, request: RoleRequest, previous: BuilderOutput | None) -> BuilderOutput:
        grounder = ProceduralBuilder(self.runtime)
        names = ("build", "app", "resources") if self.in_place else ("build", "app")
        with role_dirs("cwg-llm-builder-", names, self.in_place) as dirs:
            build_dir, scratch = dirs[0], dirs[1]
            resources = _resources_dir()
            if self.in_place:  # a copy at the path the prompt names
                copy_into(resources, dirs[2])
                resources = dirs[2]
            if previous is not None:
                export_builder(previous, build_dir)
            accepted: list[BuilderOutput] = []

            def submit(args: SubmitArgs) -> ToolResult:
                try:
                    built = load_builder(build_dir, request.spec, request.iteration)
                except LayoutError as exc:
                    return _problems("the output in /build is not valid yet", exc.problems)
                try:
                    grounder.ground(built)
                except RoleError as exc:
                    return _problems("grounding by execution failed", [str(exc)])
                accepted.append(built)
                return ToolResult(
                    "accepted: solve.sh ran turn by turn and produced every declared output",
                    done=True,
                )

            mounts = RoleMounts(
                (
                    Mount(build_dir, "/build", writable=True),
                    Mount(scratch, WORKDIR, writable=True),
                    Mount(resources, "/resources"),
                ),
                cwd="/build",
            )
            submit_tool = Tool(
                "submit",
                "Validate /build and execute solve.sh on a fresh copy of s0; ends your work "
                "when it is accepted.",
                SubmitArgs,
                submit,
            )
            task = prompts.builder_task(request.spec, request.feedback, previous is not None)
            self._run_agent(request, mounts, [submit_tool], prompts.builder_system(), task)
        return accepted[-1]


class LLMVerifierConstructor(_Role):
    role = "verifier"

    def construct(
        self, request: RoleRequest, built: BuilderOutput, previous: VerifierOutput | None
    ) -> VerifierOutput:
        # Re-executed here rather than handed over: the Verifier Constructor never trusts a
        # result it did not see produced (and a job in its own pod has no Builder memory).
        reference = ProceduralBuilder(self.runtime).ground(built)
        check = SelfCheck(self.runtime, built, reference)
        names = ("builder", "verifier", "app")
        with role_dirs("cwg-llm-verifier-", names, self.in_place) as (view, out, scratch):
            export_builder(built, view, reference=reference)
            if previous is not None:
                export_verifier(previous, out)
            accepted: list[VerifierOutput] = []

            def try_verifier(args: TryArgs) -> ToolResult:
                try:
                    output = load_verifier(out)
                except LayoutError as exc:
                    return _problems("the output in /verifier is not valid yet", exc.problems)
                own: Path | None = None
                if args.workspace:
                    own = mounts.resolve(args.workspace)
                    if not own.is_dir():
                        raise ToolError(
                            f"{args.workspace} is not a directory: build the state first"
                        )
                problems, report = check.run(output, (args.workspace, own) if own else None)
                verdict = "self-check passed" if not problems else "self-check problems:"
                return ToolResult("\n".join([report, verdict, *problems]))

            def submit(args: SubmitArgs) -> ToolResult:
                try:
                    output = load_verifier(out)
                except LayoutError as exc:
                    return _problems("the output in /verifier is not valid yet", exc.problems)
                problems, report = check.run(output)
                if problems:
                    return _problems(f"the self-check failed\n{report}", problems)
                accepted.append(output)
                return ToolResult("accepted: " + report.splitlines()[0], done=True)

            mounts = RoleMounts(
                (
                    Mount(view, "/builder"),
                    Mount(out, "/verifier", writable=True),
                    Mount(scratch, WORKDIR, writable=True),
                ),
                cwd="/verifier",
            )
            extra: list[Tool[Any]] = [
                Tool(
                    "try_verifier",
                    "Run /verifier/verifier.json on the reference completion and on the "
                    "untouched workspace, and on a failure state you built (workspace); shows "
                    "every component's score and evidence.",
                    TryArgs,
                    try_verifier,
                ),
                Tool(
                    "submit",
                    "Validate /verifier and self-check it; ends your work when accepted.",
                    SubmitArgs,
                    submit,
                ),
            ]
            task = prompts.verifier_task(request.spec, request.feedback, previous is not None)
            self._run_agent(request, mounts, extra, prompts.verifier_system(), task)
        return accepted[-1]


class SelfCheck:
    """The Verifier Constructor's self-validation: the reference completion must pass and
    the untouched workspace (s0 after every user patch) must fail. A state the role built
    itself (a failure it wants to see scored) is scored beside them, judged by the role."""

    def __init__(self, runtime: LocalRuntime, built: BuilderOutput, reference: dict[str, bytes]):
        self.runtime = runtime
        self.built = built
        self.reference = reference

    def run(
        self, output: VerifierOutput, own: tuple[str, Path] | None = None
    ) -> tuple[list[str], str]:
        """Problems and a report; ``own``: (its name, where it is) of a state the role built."""
        pkg = assemble(self.built, output)
        scoring = output.spec.scoring
        problems: list[str] = []
        with tempfile.TemporaryDirectory(prefix="cwg-selfcheck-") as tmp:
            states = {"reference": self.reference, "untouched": untouched(self.built)}
            outcomes: dict[str, VerifyOutcome] = {}
            for label, files in states.items():
                ws = Path(tmp) / label
                ws.mkdir()
                write_files(ws, files)
                outcomes[label] = self.runtime.run_verifier(pkg, ws, WORKDIR)
            if own is not None:  # scored from a copy (run_verifier's): the role's dir stays
                outcomes[own[0]] = self.runtime.run_verifier(pkg, own[1], WORKDIR)
        ref, untouched_run = outcomes["reference"], outcomes["untouched"]
        if not ref.valid:
            problems.append(f"the verifier is invalid on the reference completion: {ref.error}")
        elif (ref.reward or 0.0) < scoring.pass_threshold:
            problems.append(
                f"the reference completion scores {ref.reward} < pass threshold "
                f"{scoring.pass_threshold}: a check or an expected value is wrong"
            )
        if not untouched_run.valid:
            problems.append(
                f"the verifier is invalid on the untouched workspace: {untouched_run.error}"
            )
        elif (untouched_run.reward or 0.0) >= scoring.fail_threshold:
            problems.append(
                f"the untouched workspace scores {untouched_run.reward} ≥ fail threshold "
                f"{scoring.fail_threshold}: the checks do not require the deliverables"
            )
        return problems, _report(outcomes)


def untouched(built: BuilderOutput) -> dict[str, bytes]:
    """s0 with every user patch applied and no work done: what a no-op agent leaves."""
    files = dict(built.workspace)
    for turn in built.turns:
        for update in turn.patch.updates:
            if update.op == "delete":
                files.pop(update.path, None)
            elif update.source is not None:
                files[update.path] = turn.files[update.source]
    return files


def _report(outcomes: dict[str, VerifyOutcome]) -> str:
    lines = []
    for label, outcome in outcomes.items():
        if not outcome.valid:
            lines.append(f"{label}: INVALID ({outcome.error})")
            continue
        short = outcome.details.get("gates_short") or []
        gates = f" (gates below 1, so scaled: {', '.join(short)})" if short else ""
        lines.append(f"{label}: reward {outcome.reward}{gates}")
        for c in outcome.details.get("components", []) + outcome.details.get("red_lines", []):
            lines.append(f"  {c['status']:8} {c['score']:.2f} {c['id']}: {c['evidence'][:200]}")
    return "\n".join(lines)


# ---- choosing backends from the spec ----------------------------------------------------
@dataclass
class Roles:
    builder: Builder
    constructor: VerifierConstructor
    detector: IssueDetector
    session: LLMSession | None = None

    def injected(self, name: str) -> list[str]:
        """Faults injected on purpose (procedural roles only)."""
        found: list[str] = []
        for role in (self.builder, self.constructor):
            found += [str(f) for f in getattr(role, "history", {}).get(name, [])]
        return found


def llm_settings(spec: EnvironmentSpec) -> dict[str, LLMSettings]:
    backends = {
        "builder": spec.backends.builder,
        "verifier": spec.backends.verifier,
        "detector": spec.backends.detector,
    }
    return {role: LLMSettings.from_backend(b) for role, b in backends.items() if b.kind == "llm"}


@contextmanager
def role_backends(
    name: str,
    spec: EnvironmentSpec,
    runtime: LocalRuntime,
    *,
    harbor_lint: bool = True,
    session: LLMSession | None = None,
) -> Iterator[Roles]:
    """The roles the spec asks for. LLM roles share one session (one gateway) that lives as
    long as the block; a detector backend of kind 'llm' adds the LLM review pass."""
    settings = llm_settings(spec)
    owned = session is None and bool(settings)
    if owned:
        from ..llm.session import LLMSession  # needs the `llm` extra (openai)

        session = LLMSession.start(settings, stage_timeout_s=spec.budget.stage_timeout_seconds)
    try:
        builder: Builder = ProceduralBuilder(runtime)
        constructor: VerifierConstructor = ProceduralVerifierConstructor()
        detector = IssueDetector(runtime, run_harbor_lint=harbor_lint)
        if session is not None and "builder" in settings:
            builder = LLMBuilder(session, runtime)
        if session is not None and "verifier" in settings:
            constructor = LLMVerifierConstructor(session, runtime)
        if session is not None and "detector" in settings:
            from ..llm.review import LLMReviewer, ReviewingDetector

            reviewer = LLMReviewer(session, name, runtime.sandbox)
            detector = ReviewingDetector(reviewer, runtime, run_harbor_lint=harbor_lint)
        yield Roles(builder, constructor, detector, session)
    finally:
        if session is not None:
            session.end_environment(name)
            if owned:
                session.close()


def configure_llm_backends(
    spec: EnvironmentSpec,
    *,
    base_url: str | None,
    model: str | None,
    roles: dict[str, dict[str, str | None]] | None = None,
    review: bool = False,
) -> None:
    """Point the spec's Builder and Verifier Constructor (and, with ``review``, the Issue
    Detector's review) at an OpenAI-compatible endpoint; ``roles`` overrides per role
    ({"builder": {"model": ..., "base_url": ...}})."""
    wanted = ["builder", "verifier"] + (["detector"] if review else [])
    for role in wanted:
        override = (roles or {}).get(role, {})
        current: RoleBackend = getattr(spec.backends, role)
        backend = RoleBackend(
            kind="llm",
            model=override.get("model") or model or current.model,
            base_url=override.get("base_url") or base_url or current.base_url,
            api_key_secret=current.api_key_secret,
            temperature=current.temperature,
            max_turns=current.max_turns,
        )
        setattr(spec.backends, role, backend)


__all__ = [
    "LLMBuilder",
    "LLMVerifierConstructor",
    "Roles",
    "SelfCheck",
    "configure_llm_backends",
    "llm_settings",
    "role_backends",
    "role_dirs",
    "untouched",
]
