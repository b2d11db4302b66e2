"""Conditions from the loop state, and the phase derived from the conditions — a chain of
small checks, the first that matches decides (``kubectl wait --for=condition=Released``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from coworkgym.loop.machine import LoopStatus, Phase

from ..api.conditions import ConditionReason as R
from ..api.conditions import ConditionType as T
from ..api.types import Condition

Cond = tuple[str, str, str]  # status, reason, message


def conditions_for(loop: LoopStatus, pending_stage: str | None) -> dict[T, Cond]:
    phase, msg = loop.phase, loop.message
    last = loop.rounds[-1].defects if loop.rounds else []
    errors = [d for d in last if d.severity == "error"]
    out: dict[T, Cond] = {}
    # Built / VerifierBuilt: True once this round's output exists.
    stage_order = {"builder": 0, "verifier": 1, "detector": 2, "release": 3}
    at = stage_order.get(pending_stage or "", 4 if phase.is_terminal() else -1)
    failed = phase is Phase.FAILED
    out[T.BUILT] = (
        ("Unknown", R.BUILDING, msg)
        if at == 0 and not failed
        else ("False", R.BUILDER_FAILED, msg)
        if failed and pending_stage == "builder"
        else ("True", R.BUILT, "")
        if at > 0
        else ("Unknown", R.BUILDING, "waiting to start")
    )
    out[T.VERIFIER_BUILT] = (
        ("Unknown", R.CONSTRUCTING, msg)
        if at in (0, 1) and not failed
        else ("False", R.VERIFIER_FAILED, msg)
        if failed and pending_stage == "verifier"
        else ("True", R.VERIFIER_BUILT, "")
        if at > 1
        else ("Unknown", R.CONSTRUCTING, "")
    )
    if at == 2 and not failed:
        out[T.EXECUTED] = ("Unknown", R.EXECUTING, msg)
    elif failed and pending_stage == "detector":
        out[T.EXECUTED] = ("False", R.DETECTOR_FAILED, msg)
    elif errors:
        out[T.EXECUTED] = (
            "False",
            R.DEFECTS_FOUND,
            f"{len(errors)} defect(s) in round "
            f"{loop.iteration}: " + ", ".join(sorted({d.code for d in errors})),
        )
    elif loop.rounds:
        out[T.EXECUTED] = ("True", R.NO_DEFECTS, "")
    else:
        out[T.EXECUTED] = ("Unknown", R.PENDING, "not executed yet")
    out[T.RELEASED] = (
        ("True", R.RELEASED, msg)
        if phase is Phase.RELEASED
        else ("False", R.REJECTED, msg)
        if phase is Phase.REJECTED
        else ("False", R.RELEASE_FAILED, msg)
        if failed and pending_stage == "release"
        else ("Unknown", R.RELEASING, msg)
        if phase is Phase.RELEASING
        else ("Unknown", R.PENDING, "not released yet")
    )
    out[T.FAILED] = ("True", R.STAGE_FAILED, msg) if failed else ("False", R.STAGE_FAILED, "")
    return out


def _is(conds: dict[str, Condition], kind: T, status: str, reason: str | None = None) -> bool:
    c = conds.get(kind)
    return c is not None and c.status == status and (reason is None or c.reason == reason)


PHASE_CHAIN: list[tuple[Phase, Callable[[dict[str, Condition]], bool]]] = [
    (Phase.FAILED, lambda c: _is(c, T.FAILED, "True")),
    (Phase.RELEASED, lambda c: _is(c, T.RELEASED, "True")),
    (Phase.REJECTED, lambda c: _is(c, T.RELEASED, "False", R.REJECTED)),
    (Phase.RELEASING, lambda c: _is(c, T.RELEASED, "Unknown", R.RELEASING)),
    (
        Phase.EXECUTING,
        lambda c: _is(c, T.EXECUTED, "Unknown", R.EXECUTING) and _is(c, T.VERIFIER_BUILT, "True"),
    ),
    (Phase.REVISING, lambda c: _is(c, T.EXECUTED, "False", R.DEFECTS_FOUND)),
    (
        Phase.CONSTRUCTING_VERIFIER,
        lambda c: _is(c, T.VERIFIER_BUILT, "Unknown") and _is(c, T.BUILT, "True"),
    ),
    (
        Phase.BUILDING,
        lambda c: (
            _is(c, T.BUILT, "Unknown", R.BUILDING) and c[T.BUILT].message != "waiting to start"
        ),
    ),
]


def derive_phase(conditions: list[Condition]) -> Phase:
    by_type = {c.type: c for c in conditions}
    for phase, holds in PHASE_CHAIN:
        if holds(by_type):
            return phase
    return Phase.PENDING


def merge(
    previous: list[Condition],
    wanted: dict[T, Cond],
    generation: int | None,
    now: datetime | None = None,
) -> list[Condition]:
    """Keep lastTransitionTime unless the status flips (the Kubernetes convention)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = {c.type: c for c in previous}
    merged = []
    for kind, (status, reason, message) in wanted.items():
        before = old.get(kind)
        changed = before is None or before.status != status
        merged.append(
            Condition(
                type=kind,
                status=status,
                reason=reason,
                message=message[:1024],
                last_transition_time=stamp if changed else before.last_transition_time,  # type: ignore[union-attr]
                observed_generation=generation,
            )
        )
    return merged
