"""Role outputs on disk: how a Builder's output travels to the Verifier Constructor and the
Issue Detector when each runs in its own process or pod (through its own volume)."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.config import CoworkMetadata
from ..package.cowork import ArtifactGraph, Interfaces, TurnPatch, UserState
from ..verifier.spec import VerifierSpec

MANIFEST = "output.json"


def _b64(files: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in sorted(files.items())}


def _unb64(files: dict[str, str]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in files.items()}


def builder_to_json(out: BuilderOutput) -> dict[str, Any]:
    return {
        "name": out.name,
        "description": out.description,
        "instruction": out.instruction,
        "workspace": _b64(out.workspace),
        "solve_sh": out.solve_sh,
        "user": out.user.model_dump(mode="json"),
        "interfaces": out.interfaces.model_dump(mode="json"),
        "artifacts": out.artifacts.model_dump(mode="json"),
        "cowork": out.cowork.model_dump(mode="json"),
        "turns": [
            {"patch": t.patch.model_dump(mode="json"), "files": _b64(t.files)} for t in out.turns
        ],
        "agent_timeout_sec": out.agent_timeout_sec,
        "faults": list(out.faults),
    }


def builder_from_json(data: dict[str, Any]) -> BuilderOutput:
    return BuilderOutput(
        name=data["name"],
        description=data["description"],
        instruction=data["instruction"],
        workspace=_unb64(data["workspace"]),
        solve_sh=data["solve_sh"],
        user=UserState.model_validate(data["user"]),
        interfaces=Interfaces.model_validate(data["interfaces"]),
        artifacts=ArtifactGraph.model_validate(data["artifacts"]),
        cowork=CoworkMetadata.model_validate(data["cowork"]),
        turns=[
            UserTurn(TurnPatch.model_validate(t["patch"]), _unb64(t["files"]))
            for t in data["turns"]
        ],
        agent_timeout_sec=data["agent_timeout_sec"],
        faults=list(data.get("faults", [])),
    )


def verifier_to_json(out: VerifierOutput) -> dict[str, Any]:
    return {
        "spec": out.spec.model_dump(mode="json", by_alias=True),
        "private_files": _b64(out.private_files),
        "faults": list(out.faults),
    }


def verifier_from_json(data: dict[str, Any]) -> VerifierOutput:
    return VerifierOutput(
        spec=VerifierSpec.model_validate(data["spec"]),
        private_files=_unb64(data["private_files"]),
        faults=list(data.get("faults", [])),
    )


def save(directory: Path, data: dict[str, Any]) -> None:
    """Replace the output atomically: a crash mid-write leaves the previous output intact."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, directory / MANIFEST)


def load(directory: Path) -> dict[str, Any] | None:
    path = directory / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def clear(directory: Path) -> None:
    for child in directory.iterdir() if directory.is_dir() else []:
        shutil.rmtree(child) if child.is_dir() else child.unlink()
