"""One reconcile of a SynthesisCampaign, as a pure function of its children.

Level-triggered: from the campaign (spec + the status written last time) and its children
as they are (index, phase, cell, last defects), decide the status and which children to
create now. Children are created in plan order (``campaign_plan``), each wave filling the
room under ``spec.concurrency`` (children in flight: created, not yet Released, Rejected or
Failed). Names are deterministic and the high-water mark of created children is in the
status (and read back from the children themselves), so a restart duplicates nothing and a
child deleted by someone is counted missing, not made again.

    Planned ─▶ Created (waves of ≤ concurrency in flight) ─▶ Complete
                   └─ failure ratio past the threshold: no new child; those in flight finish
                      ─▶ Complete (Failed, FailureRateExceeded)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coworkgym_operator.campaign.api.types import CampaignCondition as T
from coworkgym_operator.campaign.api.types import (
    CampaignCounts,
    CellCoverage,
    DefectCount,
    SynthesisCampaignSpec,
    SynthesisCampaignStatus,
)
from coworkgym_operator.campaign.api.types import CampaignPhase as P
from coworkgym_operator.campaign.api.types import CampaignReason as R
from coworkgym_operator.campaign.reconcile.children import (
    LABEL_CAPABILITY,
    LABEL_DOMAIN,
    LABEL_INDEX,
    child_manifest,
    plan,
    unserved,
)
from coworkgym_operator.core.api import Condition, read_spec, read_status
from coworkgym_operator.core.builders import Manifest
from coworkgym_operator.core.conditions import merge
from coworkgym_operator.core.plan import ReconcilePlan

TERMINAL = {"Released": "released", "Rejected": "rejected", "Failed": "failed"}
MAX_DEFECT_CODES = 30
Cond = tuple[str, str, str]  # status, reason, message


@dataclass(frozen=True)
class ChildState:
    """One child as the controller saw it."""

    index: int
    phase: str = "Pending"
    cell: tuple[str, str] = ("", "")
    defects: tuple[str, ...] = ()  # codes of its last round's defects


def child_state(env: dict[str, Any]) -> ChildState:
    labels = env["metadata"].get("labels") or {}
    status = env.get("status") or {}
    index = str(labels.get(LABEL_INDEX, ""))
    return ChildState(
        index=int(index) if index.isdigit() else -1,
        phase=str(status.get("phase") or "Pending"),
        cell=(str(labels.get(LABEL_DOMAIN, "")), str(labels.get(LABEL_CAPABILITY, ""))),
        defects=tuple(str(d.get("code", "")) for d in status.get("defects") or []),
    )


@dataclass(frozen=True)
class CampaignObserved:
    children: list[ChildState] = field(default_factory=list)
    now: datetime | None = None  # the conditions' transition time (None: the clock's)


@dataclass
class CampaignPlan(ReconcilePlan):
    """No deletes: a campaign's children stay (they are the environments it made)."""


def reconcile_campaign(campaign: Manifest, observed: CampaignObserved) -> CampaignPlan:
    generation = campaign["metadata"].get("generation")
    previous = read_status(SynthesisCampaignStatus, campaign)  # unreadable: recounted
    spec = read_spec(SynthesisCampaignSpec, campaign)
    if isinstance(spec, str):
        return _refused(previous, generation, R.INVALID_SPEC, spec, observed)
    problems = unserved(spec)
    if problems:
        return _refused(previous, generation, R.QUOTA_NOT_SERVED, "; ".join(problems), observed)

    planned = plan(spec)
    children = {c.index: c for c in observed.children if 0 <= c.index < len(planned)}
    made = max([previous.counts.created, *(i + 1 for i in children)])
    made = min(made, len(planned))
    counts, coverage, defects = _tally(planned, children, made)
    finished = counts.released + counts.rejected + counts.failed
    ratio = (counts.rejected + counts.failed) / finished if finished else None
    threshold = spec.failure_threshold
    exceeded = (
        ratio is not None
        and finished >= threshold.min_finished
        and ratio > threshold.max_failure_ratio
    )
    # Once passed, the threshold stays passed for this generation of the spec: children
    # released later would lower the ratio and creation would flap. Changing the spec (e.g.
    # a higher maxFailureRatio) judges afresh.
    tripped = exceeded or _was(previous, T.FAILURE_RATE_EXCEEDED, generation)

    plan_out = CampaignPlan(status={})
    if not tripped:
        room = max(0, spec.concurrency - counts.in_flight)
        wave = planned[made : made + room]
        for child in wave:
            plan_out.create.append(child_manifest(campaign, spec, child))
        if wave:
            _count_created(counts, coverage, [c.cell for c in wave])
            made += len(wave)
            plan_out.events.append(
                (
                    "Normal",
                    "Created",
                    f"created {len(wave)} environment(s): {made} of {len(planned)}, "
                    f"{counts.in_flight} in flight (concurrency {spec.concurrency})",
                )
            )
    counts.created = made
    complete = counts.in_flight == 0 and (made == len(planned) or tripped)
    wanted = _conditions(counts, ratio, finished, spec, tripped, complete)
    status = SynthesisCampaignStatus(
        observed_generation=generation,
        conditions=merge(previous.conditions, wanted, generation, observed.now),
        counts=counts,
        progress=f"{finished}/{len(planned)}",
        failure_ratio=round(ratio, 4) if ratio is not None else None,
        coverage=coverage,
        defects=defects,
        message=wanted[T.COMPLETE][2] if complete else wanted[T.CREATED][2],
    )
    _finish(previous, status, plan_out, tripped and not _was(previous, T.FAILURE_RATE_EXCEEDED))
    return plan_out


def _tally(
    planned: list[Any], children: dict[int, ChildState], made: int
) -> tuple[CampaignCounts, list[CellCoverage], list[DefectCount]]:
    counts = CampaignCounts(planned=len(planned))
    cells: dict[tuple[str, str], CellCoverage] = {}
    for p in planned:
        cell = cells.setdefault(p.cell, CellCoverage(domain=p.cell[0], capability=p.cell[1]))
        cell.planned += 1
    by_phase: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for index in range(made):
        cell = cells[planned[index].cell]
        child = children.get(index)
        if child is None:
            counts.missing += 1
            continue
        cell.created += 1
        by_phase[child.phase] += 1
        codes.update(set(child.defects))
        outcome = TERMINAL.get(child.phase)
        if outcome is None:
            counts.in_flight += 1
        else:
            setattr(counts, outcome, getattr(counts, outcome) + 1)
            if outcome == "released":
                cell.released += 1
            else:
                cell.failed += 1
    counts.by_phase = dict(sorted(by_phase.items()))
    defects = [
        DefectCount(code=code, count=n)
        for code, n in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_DEFECT_CODES]
    ]
    return counts, sorted(cells.values(), key=lambda c: (c.domain, c.capability)), defects


def _count_created(
    counts: CampaignCounts, coverage: list[CellCoverage], cells: Iterable[tuple[str, str]]
) -> None:
    """Children created in this reconcile: Pending and in flight."""
    by_cell = {(c.domain, c.capability): c for c in coverage}
    for cell in cells:
        counts.in_flight += 1
        counts.by_phase["Pending"] = counts.by_phase.get("Pending", 0) + 1
        by_cell[cell].created += 1
    counts.by_phase = dict(sorted(counts.by_phase.items()))


def _conditions(
    counts: CampaignCounts,
    ratio: float | None,
    finished: int,
    spec: SynthesisCampaignSpec,
    tripped: bool,
    complete: bool,
) -> dict[T, Cond]:
    threshold = spec.failure_threshold
    made, total = counts.created, counts.planned
    share = f"{ratio:.0%}" if ratio is not None else "none"
    judged = (
        f"{counts.rejected + counts.failed} of {finished} finished children rejected or failed "
        f"({share}); the threshold is {threshold.max_failure_ratio:.0%} once "
        f"{threshold.min_finished} have finished"
    )
    out: dict[T, Cond] = {
        T.PLANNED: ("True", R.PLANNED, f"{total} environments over the cells in status.coverage")
    }
    if tripped:
        out[T.CREATED] = (
            "False",
            R.STOPPED,
            f"stopped creating at {made} of {total}: the failure threshold was passed; "
            f"{counts.in_flight} in flight",
        )
        out[T.FAILURE_RATE_EXCEEDED] = ("True", R.THRESHOLD_EXCEEDED, judged)
    else:
        if made == total:
            created: Cond = ("True", R.ALL_CREATED, f"{made} of {total} created")
        else:
            created = (
                "False",
                R.CREATING,
                f"{made} of {total} created, {counts.in_flight} in flight "
                f"(concurrency {spec.concurrency})",
            )
        out[T.CREATED] = created
        out[T.FAILURE_RATE_EXCEEDED] = ("False", R.BELOW_THRESHOLD, judged)
    result = (
        f"{counts.released} released, {counts.rejected} rejected, {counts.failed} failed of {total}"
    )
    if tripped:
        out[T.FAILED] = ("True", R.FAILURE_RATE_EXCEEDED, f"{judged}; {result}")
    elif complete:
        out[T.FAILED] = ("False", R.SUCCEEDED, result)
    else:
        out[T.FAILED] = ("False", R.IN_PROGRESS, "below the failure threshold")
    if complete:
        reason = R.FAILED if tripped else R.SUCCEEDED
        out[T.COMPLETE] = ("True", reason, result)
    else:
        out[T.COMPLETE] = ("False", R.IN_PROGRESS, f"{finished} of {total} finished")
    return out


def _refused(
    previous: SynthesisCampaignStatus,
    generation: int | None,
    reason: R,
    why: str,
    observed: CampaignObserved,
) -> CampaignPlan:
    """A spec the schema let through but the models or the taxonomy refuse: Failed, no child
    created, the field-named sentence in the conditions and the message."""
    why = why[:1000]
    wanted: dict[T, Cond] = {
        T.PLANNED: ("False", reason, why),
        T.CREATED: ("False", R.NOT_REACHED, "no environment created: the plan was refused"),
        T.FAILURE_RATE_EXCEEDED: ("False", R.BELOW_THRESHOLD, "nothing has finished"),
        T.FAILED: ("True", reason, why),
        T.COMPLETE: ("True", R.FAILED, why),
    }
    status = SynthesisCampaignStatus(
        observed_generation=generation,
        conditions=merge(previous.conditions, wanted, generation, observed.now),
        counts=previous.counts,
        progress=previous.progress,
        message=f"refused: {why[:400]}",
    )
    plan_out = CampaignPlan(status={})
    _finish(previous, status, plan_out, False)
    # one event, with the reason itself, the first time (instead of _finish's "Failed")
    plan_out.events = [("Warning", str(reason), why[:400])] if plan_out.transition else []
    return plan_out


def _was(status: SynthesisCampaignStatus, kind: T, generation: int | None = None) -> bool:
    """The condition was True (at this spec generation, if one is given)."""
    return any(
        c.type == kind
        and c.status == "True"
        and (generation is None or c.observed_generation == generation)
        for c in status.conditions
    )


def _finish(
    previous: SynthesisCampaignStatus,
    status: SynthesisCampaignStatus,
    plan_out: CampaignPlan,
    tripped_now: bool,
) -> None:
    status.phase = str(derive_campaign_phase(status.conditions))
    plan_out.status = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    if tripped_now:
        message = next(c.message for c in status.conditions if c.type == T.FAILURE_RATE_EXCEEDED)
        plan_out.events.append(("Warning", R.FAILURE_RATE_EXCEEDED, f"no new children: {message}"))
    if status.phase != previous.phase:
        plan_out.transition = (previous.phase, status.phase)
        if status.phase in (P.SUCCEEDED, P.FAILED):
            kind = "Normal" if status.phase == P.SUCCEEDED else "Warning"
            plan_out.events.append((kind, status.phase, status.message))
            plan_out.finished = status.phase.lower()


def derive_campaign_phase(conditions: list[Condition]) -> P:
    by_type = {c.type: c for c in conditions}

    def holds(kind: T, value: str = "True") -> bool:
        c = by_type.get(kind)
        return c is not None and c.status == value

    if holds(T.COMPLETE):
        return P.FAILED if holds(T.FAILED) else P.SUCCEEDED
    if holds(T.FAILED):
        return P.STOPPING
    created = by_type.get(T.CREATED)
    if created is not None and (created.status == "True" or created.reason == R.CREATING):
        return P.RUNNING
    return P.PENDING


__all__ = [
    "CampaignObserved",
    "CampaignPlan",
    "ChildState",
    "child_state",
    "derive_campaign_phase",
    "reconcile_campaign",
]
