"""Partial work: states a policy reaches by doing only part of the job, which a verifier must
not pay for. Built from the reference completion of a Cowork package, for every backend
(the review runs them on whatever package it is given):

- **stale**: the deliverables as of turn t-1, the user's later patches applied but not acted
  on (one state per later user turn t: "turn t and later ignored"); every turn solved, but
  the new input a patch brings held back until the end (the new file present, the
  deliverables computed from the old one); a changed requirement not applied (the turns
  from it on solved as the turn before it);
- **missing**: each declared output removed in turn;
- **blank free text**: every free-text field of the deliverables emptied (reasons, notes,
  prose lines), their structure kept.

A stale or missing state must score at most ``PARTIAL_WORK_BOUND``; blank free text must not
pass. Free text is what a rubric item may judge instead of code; the review runs no judge,
so a blank-text state that only an unjudged rubric item could fail is flagged
(``RUBRIC_UNJUDGED``, a warning), never silently passed. A state whose deliverables equal
the reference's is no partial work and is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..package.package import EnvironmentPackage
from .defects import DefectCode

# The most a verifier may pay for a stale or a one-deliverable-missing state. Fixed by the
# detector, not the package: a verifier cannot loosen it with its own fail threshold.
PARTIAL_WORK_BOUND = 0.5


@dataclass(frozen=True)
class Rung:
    """One bar of a probe: a reward at (or, ``strict``, above) ``bar`` raises ``code``."""

    code: DefectCode
    bar: float
    strict: bool = False

    def reached(self, reward: float) -> bool:
        return reward > self.bar if self.strict else reward >= self.bar


@dataclass(frozen=True)
class StalePlan:
    """How to reach a stale state from the reference: resume after turn ``turn - 1``, then
    for each later turn apply its patch (all but ``held_back``'s) and, when ``solve``, run
    the solution as turn ``solve_as`` (None: as the turn itself); a held-back patch is
    applied at the end, so its new input is present but unused."""

    label: str
    what: str
    turn: int  # the user turn whose change the state misses
    solve: bool
    solve_as: int | None = None
    held_back: int | None = None


def stale_plans(pkg: EnvironmentPackage) -> list[StalePlan]:
    plans = []
    for patch in pkg.patches:
        t = patch.turn
        plans.append(
            StalePlan(
                f"turn-{t}-on-ignored",
                f"deliverables as of turn {t - 1}; user turn {t} and later not acted on",
                t,
                solve=False,
            )
        )
        if patch.kind == "requirement_changed":
            plans.append(
                StalePlan(
                    f"turn-{t}-requirement-unapplied",
                    f"every input update used, but turn {t}'s changed requirement not applied",
                    t,
                    solve=True,
                    solve_as=t - 1,
                )
            )
        elif patch.updates:
            paths = ", ".join(u.path for u in patch.updates)
            plans.append(
                StalePlan(
                    f"turn-{t}-new-input-unused",
                    f"turn {t}'s new input ({paths}) present, deliverables computed without it",
                    t,
                    solve=True,
                    held_back=t,
                )
            )
    return plans


def stale_rungs(passing: float, bound: float = PARTIAL_WORK_BOUND) -> tuple[Rung, ...]:
    return (
        Rung(DefectCode.ACCEPTS_STALE_RESULT, passing),
        Rung(DefectCode.PARTIAL_CREDIT_STALE, bound, strict=True),
    )


def missing_rungs(passing: float, bound: float | None) -> tuple[Rung, ...]:
    """A Harbor task (``bound`` None) keeps the one bar it always had: it must not pass."""
    first = Rung(DefectCode.ACCEPTS_MISSING_ARTIFACT, passing)
    if bound is None:
        return (first,)
    return first, Rung(DefectCode.PARTIAL_CREDIT_MISSING, bound, strict=True)


def blank_rungs(passing: float) -> tuple[Rung, ...]:
    return (Rung(DefectCode.ACCEPTS_BLANK_TEXT, passing),)


def rubric_over(pkg: EnvironmentPackage, paths: list[str]) -> list[str]:
    """Rubric items that read any of ``paths`` (an item naming no path reads everything)."""
    if pkg.verifier is None:
        return []
    wanted = set(paths)
    return [
        item.id
        for item in pkg.verifier.rubric
        if not item.evidence_paths or wanted & set(item.evidence_paths)
    ]
