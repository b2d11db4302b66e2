"""What Harbor's separate verifier sees of an agent's state.

A plain Harbor task whose ``[verifier] environment_mode`` is ``separate`` (or that gives its
verifier an environment of its own) is verified in a fresh environment built from the task's
image: Harbor copies into it only the declared ``artifacts`` of the agent's environment, each
at its own path. Nothing else the agent wrote reaches the verifier. Scoring the agent's own
state instead would accept a task that Harbor's runner fails for every agent, its oracle
included (a separate verifier with no artifacts declared sees none of the work). So check
scores such a task on the same view Harbor gives: the image's initial working directory,
with the declared artifacts laid over it, in the working directory or outside it.

Not reproduced: what the agent publishes under Harbor's ``/logs/artifacts`` (this machine
keeps no agent logs between phases), and a verifier image of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from ..package.package import EnvironmentPackage
from ..runtime.workspace import copy_tree, root_changes


def verified_apart(pkg: EnvironmentPackage, step: str | None) -> bool:
    """Harbor verifies this plain task (this step of it) in an environment of its own."""
    if pkg.is_cowork:
        return False  # a Cowork verifier grades the workspace it is derived for
    section = pkg.config.verifier
    for declared in pkg.config.steps or []:
        if declared.name == step and declared.verifier is not None:
            section = declared.verifier
    return section.mode == "separate"


def declared_artifacts(pkg: EnvironmentPackage, step: str | None) -> list[str]:
    """The paths Harbor copies to a separate verifier: the task's and the step's."""
    specs = list(pkg.config.artifacts)
    for declared in pkg.config.steps or []:
        if declared.name == step:
            specs += declared.artifacts
    return [spec if isinstance(spec, str) else spec.source for spec in specs]


def view_apart(state: Path, initial: Path, dest: Path, sources: list[str], workdir: str) -> Path:
    """``dest``: ``initial`` (the environment as built) with each declared artifact of
    ``state`` laid over it, where ``state`` has it."""
    copy_tree(initial, dest)
    for source in sources:
        path = PurePosixPath(source)
        if not path.is_absolute():
            path = PurePosixPath(workdir) / path
        if path.is_relative_to(workdir):
            rel = path.relative_to(workdir)
            origin, target = state / rel, dest / rel
        else:
            rel = path.relative_to("/")
            origin, target = root_changes(state) / rel, root_changes(dest) / rel
        if origin.is_dir():
            shutil.copytree(origin, target, symlinks=True, dirs_exist_ok=True)
        elif origin.is_file() or origin.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, target, follow_symlinks=False)
    return dest
