"""The procedural backend: task families as Builder and Verifier Constructor.

The Builder grounds the reference solution by executing it in the sandbox, turn by turn,
checks that it produces every declared deliverable, and keeps s0 as it was before the run.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from ..families import FamilyParams, TaskFamily, UnservedLabels, family_for
from ..package.assemble import BuilderOutput, VerifierOutput
from ..package.config import CoworkMetadata, TaxonomyLabels
from ..package.cowork import ArtifactGraph
from ..runtime.local import LocalRuntime
from ..runtime.workspace import snapshot, write_files
from ..spec import EnvironmentSpec, FaultKind
from . import faults
from .base import RoleError, RoleRequest


def family_of(spec: EnvironmentSpec) -> TaskFamily:
    """The family for the spec; labels it cannot make true are a spec error, not retried."""
    task = spec.task
    try:
        return family_for(
            task.labels.scenario,
            task.labels.capabilities,
            task.turns,
            family=task.family or None,
            seed=task.seed,
        )
    except UnservedLabels as exc:
        raise RoleError(f"spec error: {exc}", retryable=False) from exc


def params_of(spec: EnvironmentSpec) -> FamilyParams:
    return FamilyParams(
        seed=spec.task.seed, difficulty=spec.task.labels.difficulty, turns=spec.task.turns
    )


def _initial_faults(
    request: RoleRequest, role: str, owned: tuple[FaultKind, ...]
) -> list[FaultKind]:
    injection = request.spec.fault_injection
    if injection.probability <= 0:
        return []
    rng = random.Random(f"{request.spec.task.seed}:{request.name}:{role}")
    return faults.choose(rng, injection.probability, list(injection.kinds), owned)


def _faults_now(
    request: RoleRequest,
    previous: BuilderOutput | VerifierOutput | None,
    role: str,
    owned: tuple[FaultKind, ...],
) -> list[FaultKind]:
    """First attempt: draw faults. A revision: keep the previous faults the feedback did not
    reveal (the repair). Faults travel in the outputs, so a revise step in a fresh process
    (a Kubernetes Job) repairs exactly what the previous one injected."""
    if previous is None:
        return _initial_faults(request, role, owned)
    codes = {d.code for d in request.feedback}
    kept = [f for f in previous.faults if f in owned]
    return faults.repaired(kept, codes)


class ProceduralBuilder:
    def __init__(self, runtime: LocalRuntime | None = None) -> None:
        self._runtime = runtime
        self.history: dict[str, list[FaultKind]] = {}  # environment name → faults injected

    @property
    def runtime(self) -> LocalRuntime:
        if self._runtime is None:
            self._runtime = LocalRuntime()
        return self._runtime

    def build(self, request: RoleRequest, previous: BuilderOutput | None) -> BuilderOutput:
        spec = request.spec
        family, params = family_of(spec), params_of(spec)
        active = _faults_now(request, previous, "builder", faults.BUILDER_FAULTS)
        self.history.setdefault(request.name, list(active))
        draft = family.draft(params)
        labels = spec.task.labels
        built = BuilderOutput(
            name=f"coworkgym/{draft.slug}",
            description=draft.title,
            instruction=draft.instruction,
            workspace=draft.workspace,
            solve_sh=draft.solve_sh,
            user=draft.user,
            interfaces=draft.interfaces,
            artifacts=ArtifactGraph(artifacts=[*draft.inputs, *draft.outputs]),
            cowork=CoworkMetadata(
                taxonomy=TaxonomyLabels(
                    capabilities=list(labels.capabilities),
                    scenario=labels.scenario,
                    difficulty=labels.difficulty,
                    user_role=labels.user_role,
                    deliverables=list(labels.deliverables),
                    modality=list(labels.modality),
                    safety=list(labels.safety),
                ),
                family=family.name,
                seed=params.seed,
                spec_digest=spec.digest(),
                iterations=request.iteration + 1,
            ),
            turns=draft.turns,
            agent_timeout_sec=draft.agent_timeout_sec,
        )
        reference = self.ground(built)
        if "leak" in active:
            built = faults.inject_leak(built, reference)
        built.faults = list(active)
        return built

    def ground(self, built: BuilderOutput) -> dict[str, bytes]:
        """Execute the reference solution on a scratch copy of s0 (turn by turn, applying each
        user patch first); return the final workspace. s0 itself is left untouched."""
        with tempfile.TemporaryDirectory(prefix="cwg-ground-") as tmp:
            workspace = Path(tmp) / "workspace"
            write_files(workspace, built.workspace)
            solution = {"solve.sh": built.solve_sh.encode()}
            for turn in range(1 + len(built.turns)):
                if turn:
                    _apply(built, turn, workspace)
                result = self.runtime.run_script(solution, workspace, "/app", turn)
                if not result.ok:
                    raise RoleError(
                        f"reference solution failed at turn {turn}: {result.describe()}"
                    )
            final = snapshot(workspace)
        missing = [a.path for a in built.artifacts.outputs if a.path not in final]
        if missing:
            raise RoleError(f"reference solution did not produce {missing}")
        return final


def _apply(built: BuilderOutput, turn: int, workspace: Path) -> None:
    patch = built.turns[turn - 1]
    for update in patch.patch.updates:
        target = workspace / update.path
        if update.op == "delete":
            target.unlink(missing_ok=True)
        elif update.source is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(patch.files[update.source])


class ProceduralVerifierConstructor:
    def __init__(self) -> None:
        self.history: dict[str, list[FaultKind]] = {}

    def construct(
        self, request: RoleRequest, built: BuilderOutput, previous: VerifierOutput | None
    ) -> VerifierOutput:
        active = _faults_now(request, previous, "verifier", faults.VERIFIER_FAULTS)
        output = family_of(request.spec).verifier(built, params_of(request.spec))
        output, applied = faults.apply_verifier_faults(output, active)
        self.history.setdefault(request.name, list(applied))
        output.faults = list[str](applied)
        return output
