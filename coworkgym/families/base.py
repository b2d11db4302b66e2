"""What a procedural task family provides.

A family is parametric: from a seed, a difficulty and a number of user turns it drafts a
task grounded in a bundled resource (``draft``), and — separately, from the task's *inputs*
only — the verifier for it (``verifier``). The two are deliberately independent code paths:
the reference solution is a shell script executed in a sandbox, while the expected values
are computed here in Python, so a wrong reference shows up as a disagreement.
"""

from __future__ import annotations

import csv
import io
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import ClassVar, Literal

from ..package.assemble import BuilderOutput, UserTurn, VerifierOutput
from ..package.cowork import Artifact, Interfaces, TurnPatch, UserState

Difficulty = Literal["easy", "medium", "hard"]


@dataclass(frozen=True)
class FamilyParams:
    seed: int
    difficulty: Difficulty = "medium"
    turns: int = 1  # user turns including the first request

    def rng(self, salt: str = "") -> random.Random:
        return random.Random(f"{self.seed}:{salt}")


@dataclass
class FamilyDraft:
    """The Builder's output before grounding: the solution has not been executed yet."""

    slug: str
    title: str
    instruction: str
    workspace: dict[str, bytes]
    solve_sh: str
    user: UserState
    inputs: list[Artifact]
    outputs: list[Artifact]
    turns: list[UserTurn] = field(default_factory=list)
    interfaces: Interfaces = field(
        default_factory=lambda: Interfaces(
            tools=["shell", "read_file", "write_file", "edit_file", "list_files"]
        )
    )
    agent_timeout_sec: float = 900.0


Cell = tuple[str, str]  # (scenario leaf, capability)


@dataclass(frozen=True)
class Reading:
    """A checked value that a reasonable reader of the task could compute in more than one
    way — a tie in an argmax, a rounding, an inclusive or exclusive bound — with the value
    under each reading. The instruction (or the user turn that asks for the value) settles
    it when a sentence naming ``subject`` matches the reading's phrase (a regex, case
    insensitive); the Issue Detector flags a value whose readings differ and that no
    sentence settles (``coworkgym.detector.ambiguity``)."""

    component: str  # the verifier component that checks the value
    subject: str  # how the task's text names the value, e.g. "windiest_month"
    values: Mapping[str, object]  # reading → the value under it
    phrases: Mapping[str, str]  # reading → the regex of a sentence that chooses it
    tolerance: float = 0.0  # values closer than this are the same answer


@dataclass(frozen=True)
class Trap:
    """Something the agent must notice in the data itself, which the instruction does not
    say, with the phrases that would give it away (regexes, case insensitive). The user
    never says one: not in a turn message, not in an answer (``coworkgym.detector.
    user_hints`` checks the package, the user simulator every reply)."""

    name: str
    what: str  # the trap, for the defect's message
    giveaways: tuple[str, ...]

    def given_away(self, text: str) -> str | None:
        """The first giveaway phrase ``text`` matches, or None."""
        for phrase in self.giveaways:
            if re.search(phrase, text, re.IGNORECASE):
                return phrase
        return None


class TaskFamily(ABC):
    """A family declares, as data, the labels that are true of every task it drafts: the
    taxonomy cells it serves (each of its ``scenarios`` leaves × each of its
    ``capabilities``), the deliverables it produces, the modalities it reads and its safety
    concerns. A capability only a later user turn exercises (tracking a changed requirement,
    redoing work after an input changed) is listed in ``later_capabilities`` too, and served
    from ``full_turns`` user turns on: the fewest turns whose drafted later turns always
    include every kind of turn the family has."""

    name: ClassVar[str]
    scenarios: ClassVar[tuple[str, ...]]  # taxonomy scenario leaves this family serves
    capabilities: ClassVar[tuple[str, ...]]
    deliverables: ClassVar[tuple[str, ...]]
    modalities: ClassVar[tuple[str, ...]]
    safety: ClassVar[tuple[str, ...]] = ("none",)
    later_capabilities: ClassVar[tuple[str, ...]] = ()
    traps: ClassVar[tuple[Trap, ...]] = ()  # what the user must never give away
    full_turns: ClassVar[int] = 3
    max_turns: ClassVar[int] = 3

    def capabilities_at(self, turns: int) -> tuple[str, ...]:
        """The capabilities every task of ``turns`` user turns exercises."""
        later = set(self.later_capabilities) if turns < self.full_turns else set()
        return tuple(c for c in self.capabilities if c not in later)

    def serves(self, scenario: str, capability: str, turns: int) -> bool:
        return (
            scenario in self.scenarios
            and capability in self.capabilities_at(turns)
            and 1 <= turns <= self.max_turns
        )

    def cells(self, turns: int) -> list[Cell]:
        """The (scenario leaf, capability) cells served with ``turns`` user turns."""
        return [(s, c) for s in self.scenarios for c in self.capabilities_at(turns)]

    @abstractmethod
    def draft(self, params: FamilyParams) -> FamilyDraft: ...

    @abstractmethod
    def verifier(self, built: BuilderOutput, params: FamilyParams) -> VerifierOutput:
        """Expected values from ``built.final_inputs()`` — never from reference outputs."""

    def readings(self, inputs: Mapping[str, bytes], turns: Sequence[TurnPatch]) -> list[Reading]:
        """The alternative readings of the values the verifier checks, from the final
        ``inputs`` (path → content) and the later ``turns``; none by default."""
        return []


NEVER = 99  # a turn index no package reaches: "this requirement never applies"


def plan_turns(rng: random.Random, params: FamilyParams, data_kind: str) -> tuple[list[str], int]:
    """Which later user turns a task gets (in a seeded order), and the turn from which the
    changed requirement applies (NEVER when no turn changes it)."""
    kinds = [data_kind, "requirement_changed"]
    rng.shuffle(kinds)
    turn_kinds = kinds[: params.turns - 1]
    changed_from = NEVER
    if "requirement_changed" in turn_kinds:
        changed_from = 1 + turn_kinds.index("requirement_changed")
    return turn_kinds, changed_from


def resource_bytes(name: str) -> bytes:
    return resources.files("coworkgym.resources").joinpath(name).read_bytes()


def read_csv_resource(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(resource_bytes(name).decode("utf-8"))))


def write_csv(rows: list[dict[str, object]], columns: list[str]) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    return buffer.getvalue().encode()


def parse_csv(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
