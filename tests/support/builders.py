"""Builders for test objects: real packages from the procedural families."""

from __future__ import annotations

from functools import cache

from coworkgym.families import FAMILIES
from coworkgym.package.assemble import BuilderOutput, VerifierOutput, assemble
from coworkgym.package.package import EnvironmentPackage
from coworkgym.roles.base import RoleRequest
from coworkgym.roles.procedural import ProceduralBuilder, ProceduralVerifierConstructor
from coworkgym.spec import EnvironmentSpec


def environment_spec(
    family: str = "weather_report",
    turns: int = 1,
    seed: int = 7,
    difficulty: str = "medium",
    **extra: object,
) -> EnvironmentSpec:
    """A spec the family serves, labelled with what its task is (its first scenario)."""
    chosen = FAMILIES[family]
    return EnvironmentSpec.model_validate(
        {
            "task": {
                "labels": {
                    "capabilities": list(chosen.capabilities_at(turns)),
                    "scenario": chosen.scenarios[0],
                    "deliverables": list(chosen.deliverables),
                    "modality": list(chosen.modalities),
                    "safety": list(chosen.safety),
                    "difficulty": difficulty,
                },
                "turns": turns,
                "seed": seed,
                "family": family,
            },
            **extra,
        }
    )


@cache
def role_outputs(
    family: str = "weather_report", turns: int = 1, seed: int = 7, difficulty: str = "medium"
) -> tuple[BuilderOutput, VerifierOutput]:
    spec = environment_spec(family, turns, seed, difficulty)
    request = RoleRequest(name="test", spec=spec, iteration=0)
    built = ProceduralBuilder().build(request, None)
    return built, ProceduralVerifierConstructor().construct(request, built, None)


def good_package(
    family: str = "weather_report", turns: int = 1, seed: int = 7, difficulty: str = "medium"
) -> EnvironmentPackage:
    return assemble(*role_outputs(family, turns, seed, difficulty))
