"""The SynthesisCampaign CustomResourceDefinition, generated from the pydantic models
(campaign/api/types.py) by the structural conversion every kind shares (core/crd.py).

    python -m coworkgym_operator.campaign.api.crd            # rewrite crds/ and the chart's copy
    python -m coworkgym_operator.campaign.api.crd --check    # exit 1 if either has drifted

What the API server refuses:

- a quota cell whose domain or capability is not in the taxonomy: enums generated from
  coworkgym/taxonomy/taxonomy.yaml ("Unsupported value" on spec.quotas.cells[i].domain);
- a cell listed twice (the list is a map keyed by domain and capability: "Duplicate value");
- quotas that are neither cells nor a total, or filters without a total;
- with a procedural Builder, a cell no family serves with up to maxTurns turns: a CEL rule
  over the served cells per maxTurns, generated from the family registry (adding a family
  changes the CRD, and the drift check says so). Its message is static (see
  _unserved_rule); `kubectl explain` and `cowork-gym coverage --families` show the served
  cells, and the operator names each unserved cell should one get past the CRD;
- a change of quotas, seed or maxTurns, and a name longer than 38 characters.

The operator checks the same again (an older CRD, a rule CEL could not say): the campaign
ends Failed with reason InvalidSpec or QuotaNotServed and the field-named sentence.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from coworkgym_operator.campaign.api.types import (
    CAMPAIGN_KIND,
    CAMPAIGN_PLURAL,
    CAMPAIGN_SHORT_NAME,
    CAMPAIGN_SINGULAR,
    FILTERS_NEED_TOTAL,
    MAX_NAME,
    NAME_TOO_LONG,
    ONE_QUOTA,
    SPEC_FROZEN,
    UNSERVED_CELLS,
    SynthesisCampaignSpec,
    SynthesisCampaignStatus,
)
from coworkgym_operator.core import crd as base


def _served_map(max_turns: int) -> str:
    """A CEL map literal of the served cells ("domain/capability": true) at ``max_turns``."""
    from coworkgym.taxonomy import served_grid

    cells = sorted(served_grid(turns=tuple(range(1, max_turns + 1))))
    return "{" + ", ".join(f"{json.dumps(f'{d}/{c}')}: true" for d, c in cells) + "}"


def _unserved_rule() -> dict[str, str]:
    served = {t: _served_map(t) for t in (1, 2, 3)}
    table = f"(self.maxTurns == 1 ? {served[1]} : self.maxTurns == 2 ? {served[2]} : {served[3]})"
    llm = (
        "(has(self.backends) && has(self.backends.builder) && self.backends.builder.kind == 'llm')"
    )
    cell = "c.domain + '/' + c.capability"
    # The message is static: the API server's cost estimate refuses a messageExpression on
    # spec (even "'x' + string(self.maxTurns)"; unbounded fields elsewhere in spec count). So
    # the API server names the field and the rule, and the operator's own check (the same
    # served cells) names each cell: a campaign that gets past an older CRD ends Failed,
    # QuotaNotServed, with the cells in the message.
    return {
        "rule": f"!has(self.quotas.cells) || {llm} || self.quotas.cells.all(c, {cell} in {table})",
        "message": UNSERVED_CELLS,
        "reason": "FieldValueInvalid",
        "fieldPath": ".quotas.cells",
    }


NAMES = (CAMPAIGN_KIND, CAMPAIGN_PLURAL, CAMPAIGN_SINGULAR, CAMPAIGN_SHORT_NAME)
DESCRIPTION = (
    "Many CoworkEnvironments drawn from the taxonomy by quota, created in waves under a "
    "concurrency limit, with their coverage per cell in status."
)

RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [base.unchanged_rule(("quotas", "seed", "maxTurns"), SPEC_FROZEN)],
    ("spec", "quotas"): [
        {"rule": "has(self.cells) != has(self.total)", "message": ONE_QUOTA},
        {
            "rule": "!has(self.cells) || ((!has(self.domains) || size(self.domains) == 0) && "
            "(!has(self.capabilities) || size(self.capabilities) == 0))",
            "message": FILTERS_NEED_TOTAL,
        },
    ],
}

# kubectl get scamp -w: how far it is, at a glance; -o wide adds the counts behind it.
COLUMNS = [
    base.PHASE,
    base.column("Finished", ".status.progress", description="finished/planned children"),
    base.column("Released", ".status.counts.released", "integer"),
    base.column("InFlight", ".status.counts.inFlight", "integer"),
    base.column(
        "FailureRatio",
        ".status.failureRatio",
        "number",
        description="(rejected + failed) / finished",
    ),
    base.MESSAGE,
    base.column("Created", ".status.counts.created", "integer", wide=True),
    base.column("Rejected", ".status.counts.rejected", "integer", wide=True),
    base.column("Failed", ".status.counts.failed", "integer", wide=True),
    base.AGE,
]


def _shape(spec_schema: dict[str, Any], _status: dict[str, Any]) -> None:
    base.node_at(spec_schema, ("spec",))["x-kubernetes-validations"].append(_unserved_rule())
    base.set_lists(spec_schema, [("spec", "quotas", "domains"), ("spec", "quotas", "capabilities")])
    cells = base.node_at(spec_schema, ("spec", "quotas", "cells"))
    cells["x-kubernetes-list-type"] = "map"
    cells["x-kubernetes-list-map-keys"] = ["domain", "capability"]


NAME_RULES = [{"rule": f"self.metadata.name.size() <= {MAX_NAME}", "message": NAME_TOO_LONG}]
DEFINITION = base.Definition(
    NAMES, __package__, DESCRIPTION, SynthesisCampaignSpec, SynthesisCampaignStatus, COLUMNS,
    RULES, _shape, NAME_RULES,
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(DEFINITION.main(sys.argv[1:]))
