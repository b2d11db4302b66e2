"""A campaign's plan: every child's task, drawn once from the taxonomy, in creation order.

The plan is a pure function of the frozen part of the spec (quotas, seed, maxTurns; CEL
keeps them immutable), so every reconcile, and every operator after a restart, computes
the same list: child ``i`` is always ``<campaign>-<i:05d>`` with the same task, and a
child that exists is never created again.

Tasks come from the taxonomy sampler (``coworkgym.taxonomy.sample_specs``), the same one
``cowork-gym synth --count`` uses: with ``total``, the sampler balances over the served
cells (counts differ by at most one, and every prefix of the plan is as balanced); with
``cells``, each cell's count is drawn in that cell, and the cells take turns in the plan so
that the first waves already spread over them. A procedural Builder can only build cells a
family serves (with up to ``maxTurns`` turns): a quota naming another cell is refused, with
the cells named; an LLM Builder may build any cell of the grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import zip_longest

from coworkgym.spec import EnvironmentSpec, TaskSpec
from coworkgym.taxonomy import load_taxonomy, sample_specs, served_grid
from coworkgym_operator.campaign.api.types import API_VERSION, CAMPAIGN_KIND, SynthesisCampaignSpec
from coworkgym_operator.core.builders import Manifest, Owner
from coworkgym_operator.core.sharding import LABEL_SHARD

Cell = tuple[str, str]
LABEL_CAMPAIGN = "coworkgym.dev/campaign"
OWNER = Owner(API_VERSION, CAMPAIGN_KIND, LABEL_CAMPAIGN)
LABEL_INDEX = "coworkgym.dev/campaign-index"
LABEL_DOMAIN = "coworkgym.dev/domain"
LABEL_CAPABILITY = "coworkgym.dev/capability"


@dataclass(frozen=True)
class PlannedEnvironment:
    index: int
    cell: Cell
    task: TaskSpec


def child_name(campaign: str, index: int) -> str:
    return f"{campaign}-{index:05d}"


@lru_cache(maxsize=4)
def served_cells(max_turns: int) -> frozenset[Cell]:
    """The cells some procedural family serves with 1 to ``max_turns`` user turns."""
    return frozenset(served_grid(turns=tuple(range(1, max_turns + 1))))


def _procedural(spec: SynthesisCampaignSpec) -> bool:
    return spec.backends.builder.kind == "procedural"


def _narrowed(spec: SynthesisCampaignSpec) -> list[Cell]:
    tax = load_taxonomy()
    domains = spec.quotas.domains or list(tax.scenarios)
    capabilities = spec.quotas.capabilities or list(tax.capabilities)
    return [(d, c) for d in domains for c in capabilities]


def unserved(spec: SynthesisCampaignSpec, prefix: str = "spec.") -> list[str]:
    """Why the quotas ask for more than the taxonomy serves, one sentence per problem, each
    naming the field and the cells (empty: the plan can be made)."""
    if not _procedural(spec):
        return []
    served = served_cells(spec.max_turns)
    turns = f"with up to {spec.max_turns} turn(s)"
    if spec.quotas.cells is not None:
        problems = []
        for i, quota in enumerate(spec.quotas.cells):
            if quota.cell not in served:
                others = sorted(c for d, c in served if d == quota.domain)
                hint = (
                    f"served capabilities of {quota.domain}: {', '.join(others)}"
                    if others
                    else f"no cell of {quota.domain} is served"
                )
                problems.append(
                    f"{prefix}quotas.cells[{i}]: {quota.domain} × {quota.capability} is served "
                    f"by no procedural family {turns} ({hint}); use an llm builder, more "
                    "turns, or another cell"
                )
        return problems
    if not any(cell in served for cell in _narrowed(spec)):
        return [
            f"{prefix}quotas: no cell of domains {spec.quotas.domains or 'all'} × capabilities "
            f"{spec.quotas.capabilities or 'all'} is served by a procedural family {turns}; "
            "widen them, or use an llm builder"
        ]
    return []


def plan(spec: SynthesisCampaignSpec) -> list[PlannedEnvironment]:
    """Every child's task, in creation order (call only when ``unserved`` is empty)."""
    return list(_plan(spec.quotas.model_dump_json(), spec.seed, spec.max_turns, _procedural(spec)))


@lru_cache(maxsize=16)
def _plan(
    quotas_json: str, seed: int, max_turns: int, procedural: bool
) -> tuple[PlannedEnvironment, ...]:
    from coworkgym_operator.campaign.api.types import Quotas

    quotas = Quotas.model_validate_json(quotas_json)
    turns = tuple(range(1, max_turns + 1))
    if quotas.total is not None:
        drawn = sample_specs(
            quotas.total,
            seed,
            turns=turns,
            served_only=procedural,
            domains=quotas.domains or None,
            capabilities=quotas.capabilities or None,
        )
        ordered = [(s.cell, s.task_spec()) for s in drawn]
    else:
        per_cell = [
            [
                (q.cell, s.task_spec())
                for s in sample_specs(
                    q.count,
                    seed,
                    turns=turns,
                    served_only=procedural,
                    domains=[q.domain],
                    capabilities=[q.capability],
                )
            ]
            for q in quotas.cells or []
        ]
        # the cells take turns: wave after wave covers them evenly
        ordered = [item for rank in zip_longest(*per_cell) for item in rank if item is not None]
    return tuple(PlannedEnvironment(i, cell, task) for i, (cell, task) in enumerate(ordered))


def child_manifest(
    campaign: Manifest, spec: SynthesisCampaignSpec, planned: PlannedEnvironment
) -> Manifest:
    """The CoworkEnvironment of one planned task: the campaign's shared settings, owned by
    the campaign (garbage-collected with it), labelled with its campaign, index, cell and
    operator shard."""
    name = child_name(campaign["metadata"]["name"], planned.index)
    env_spec = EnvironmentSpec(
        task=planned.task,
        backends=spec.backends,
        budget=spec.budget,
        fault_injection=spec.fault_injection,
        release=spec.release,
        sandbox=spec.sandbox,
    )
    domain, capability = planned.cell
    labels = {
        LABEL_INDEX: str(planned.index),
        LABEL_DOMAIN: domain,
        LABEL_CAPABILITY: capability,
    }
    if spec.shards:  # spread over the operator's shards (else: the campaign's own, inherited)
        labels[LABEL_SHARD] = spec.shards[planned.index % len(spec.shards)]
    return {
        "apiVersion": API_VERSION,
        "kind": "CoworkEnvironment",
        "metadata": OWNER.metadata(campaign, name, **labels),
        "spec": env_spec.to_wire(),
    }


__all__ = [
    "LABEL_CAMPAIGN",
    "PlannedEnvironment",
    "child_manifest",
    "child_name",
    "plan",
    "served_cells",
    "unserved",
]
