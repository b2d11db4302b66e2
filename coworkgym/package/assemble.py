"""Assemble a package from what the roles produced.

The Builder owns the task, s0, interfaces, the user and the reference solution; the Verifier
Constructor owns tests/. Keeping the two outputs as separate types is what lets the loop
re-run only the owner of a defect.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import tomli_w

from ..verifier import engine_files
from ..verifier.spec import VerifierSpec
from . import templates
from .config import (
    AgentSection,
    CoworkMetadata,
    EnvironmentSection,
    StepSection,
    TaskConfig,
    TaskSection,
    VerifierSection,
)
from .cowork import ArtifactGraph, Interfaces, TurnPatch, UserState
from .package import (
    ARTIFACT_GRAPH,
    INSTRUCTION,
    INTERFACES,
    PATCH_DIR,
    SOLVE_SH,
    TASK_TOML,
    TEST_SH,
    USER_STATE,
    VERIFIER_INPUTS,
    VERIFIER_SPEC,
    WORKSPACE_DIR,
    EnvironmentPackage,
    dumps_json,
)


@dataclass
class UserTurn:
    patch: TurnPatch
    files: dict[str, bytes] = field(default_factory=dict)  # contents for 'write' updates


@dataclass
class BuilderOutput:
    name: str
    description: str
    instruction: str
    workspace: dict[str, bytes]
    solve_sh: str
    user: UserState
    interfaces: Interfaces
    artifacts: ArtifactGraph
    cowork: CoworkMetadata
    turns: list[UserTurn] = field(default_factory=list)
    agent_timeout_sec: float = 900.0
    faults: list[str] = field(default_factory=list)  # defects injected on purpose (testing)

    def final_inputs(self) -> dict[str, bytes]:
        """The declared inputs after every user turn: what the deliverables must answer to."""
        # an input may first appear in a later turn (a file the user drops in)
        files = {
            a.path: self.workspace[a.path]
            for a in self.artifacts.inputs
            if a.path in self.workspace
        }
        for turn in self.turns:
            for update in turn.patch.updates:
                if update.op == "delete":
                    files.pop(update.path, None)
                elif update.source is not None:
                    files[update.path] = turn.files[update.source]
        return files


@dataclass
class VerifierOutput:
    spec: VerifierSpec
    private_files: dict[str, bytes] = field(default_factory=dict)  # under tests/, e.g. inputs/
    faults: list[str] = field(default_factory=list)  # defects injected on purpose (testing)


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def task_keywords(cowork: CoworkMetadata) -> list[str]:
    """The scenario's domain, then the capabilities, each once: a domain may share its name
    with a capability (``data_analysis/...`` with ``data_analysis``)."""
    labels = [cowork.taxonomy.scenario.split("/")[0], *cowork.taxonomy.capabilities]
    return list(dict.fromkeys(labels))


def task_config(built: BuilderOutput) -> TaskConfig:
    cowork = built.cowork.model_copy(update={"turns": 1 + len(built.turns)})
    steps = None
    if built.turns:
        steps = [StepSection(name=f"turn-{t}") for t in range(1 + len(built.turns))]
    return TaskConfig(
        task=TaskSection(
            name=built.name,
            description=built.description,
            keywords=task_keywords(cowork),
        ),
        metadata={"cowork": cowork.model_dump(mode="json", exclude_none=True)},
        artifacts=[templates.WORKDIR],
        agent=AgentSection(timeout_sec=built.agent_timeout_sec, user=templates.AGENT_USER),
        verifier=VerifierSection(
            timeout_sec=300.0, environment_mode="separate", network_mode="no-network"
        ),
        environment=EnvironmentSection(
            cpus=1,
            memory_mb=2048,
            storage_mb=4096,
            network_mode="no-network",
            workdir=templates.WORKDIR,
        ),
        multi_step_reward_strategy="final" if steps else None,
        steps=steps,
    )


def assemble(built: BuilderOutput, verifier: VerifierOutput) -> EnvironmentPackage:
    config = task_config(built)
    files: dict[str, bytes] = {
        TASK_TOML: tomli_w.dumps(config.model_dump(mode="json", exclude_none=True)).encode(),
        INSTRUCTION: _text(built.instruction),
        "environment/Dockerfile": templates.AGENT_DOCKERFILE.encode(),
        SOLVE_SH: _text(built.solve_sh),
        TEST_SH: templates.TEST_SH.encode(),
        "tests/Dockerfile": templates.VERIFIER_DOCKERFILE.encode(),
        VERIFIER_SPEC: dumps_json(verifier.spec.engine_dict()),
        USER_STATE: dumps_json(built.user),
        INTERFACES: dumps_json(built.interfaces),
        ARTIFACT_GRAPH: dumps_json(built.artifacts),
    }
    files.update({f"{WORKSPACE_DIR}/{k}": v for k, v in built.workspace.items()})
    files.update({f"tests/{k}": v for k, v in verifier.private_files.items()})
    files.update({f"tests/cowork_verifier/{k}": v for k, v in engine_files().items()})
    executables = {SOLVE_SH, TEST_SH}
    for turn in built.turns:
        base = f"{PATCH_DIR}/turn-{turn.patch.turn:02d}"
        files[f"{base}/patch.json"] = dumps_json(turn.patch)
        files.update({f"{base}/files/{k}": v for k, v in turn.files.items()})
    if built.turns:
        executables |= _steps(built, files)
    return EnvironmentPackage.from_files(files, executables)


def _steps(built: BuilderOutput, files: dict[str, bytes]) -> set[str]:
    """Harbor [[steps]]: one per user turn; later steps' workdir/ carries the turn's patch."""
    executables = set()
    files["steps/turn-0/instruction.md"] = _text(built.instruction)
    for turn_index in range(1 + len(built.turns)):
        solve = f"steps/turn-{turn_index}/solution/solve.sh"
        files[solve] = templates.step_solve_sh(built.solve_sh, turn_index).encode()
        executables.add(solve)
    for turn in built.turns:
        step = f"steps/turn-{turn.patch.turn}"
        files[f"{step}/instruction.md"] = _text(turn.patch.message)
        deleted = []
        for update in turn.patch.updates:
            if update.op == "write" and update.source is not None:
                files[f"{step}/workdir/{update.path}"] = turn.files[update.source]
            else:
                deleted.append(update.path)
        files[f"{step}/workdir/setup.sh"] = templates.step_setup_sh(deleted).encode()
        executables.add(f"{step}/workdir/setup.sh")
    return executables


def _text(value: str) -> bytes:
    return (value.rstrip("\n") + "\n").encode()


__all__ = [
    "VERIFIER_INPUTS",
    "BuilderOutput",
    "UserTurn",
    "VerifierOutput",
    "assemble",
    "sha256_hex",
    "task_config",
]
