"""Generate the SynthesisCampaign CustomResourceDefinition from the pydantic models
(api/campaign.py), with the structural conversion of the CoworkEnvironment CRD (api/crd.py).

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

TARGETS = [
    base.REPO / "crds" / f"{CAMPAIGN_PLURAL}.yaml",
    base.REPO / "charts" / "cowork-gym" / "crds" / f"{CAMPAIGN_PLURAL}.yaml",
]


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


CEL_RULES: dict[tuple[str, ...], list[dict[str, str]]] = {
    ("spec",): [
        {
            "rule": "self.quotas == oldSelf.quotas && self.seed == oldSelf.seed && "
            "self.maxTurns == oldSelf.maxTurns",
            "message": SPEC_FROZEN,
        },
    ],
    ("spec", "quotas"): [
        {"rule": "has(self.cells) != has(self.total)", "message": ONE_QUOTA},
        {
            "rule": "!has(self.cells) || ((!has(self.domains) || size(self.domains) == 0) && "
            "(!has(self.capabilities) || size(self.capabilities) == 0))",
            "message": FILTERS_NEED_TOTAL,
        },
    ],
}
SET_LISTS = [("spec", "quotas", "domains"), ("spec", "quotas", "capabilities")]

# kubectl get scamp -w: how far it is, at a glance; -o wide adds the counts behind it.
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {
        "name": "Finished",
        "type": "string",
        "jsonPath": ".status.progress",
        "description": "finished/planned children",
    },
    {"name": "Released", "type": "integer", "jsonPath": ".status.counts.released"},
    {"name": "InFlight", "type": "integer", "jsonPath": ".status.counts.inFlight"},
    {
        "name": "FailureRatio",
        "type": "number",
        "jsonPath": ".status.failureRatio",
        "description": "(rejected + failed) / finished",
    },
    {"name": "Message", "type": "string", "jsonPath": ".status.message"},
    {"name": "Created", "type": "integer", "jsonPath": ".status.counts.created", "priority": 1},
    {"name": "Rejected", "type": "integer", "jsonPath": ".status.counts.rejected", "priority": 1},
    {"name": "Failed", "type": "integer", "jsonPath": ".status.counts.failed", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> dict[str, Any]:
    spec_schema = base.model_schema(SynthesisCampaignSpec)
    for path, rules in CEL_RULES.items():
        base.node_at(spec_schema, path)["x-kubernetes-validations"] = list(rules)
    base.node_at(spec_schema, ("spec",))["x-kubernetes-validations"].append(_unserved_rule())
    for path in SET_LISTS:
        base.node_at(spec_schema, path)["x-kubernetes-list-type"] = "set"
    cells = base.node_at(spec_schema, ("spec", "quotas", "cells"))
    cells["x-kubernetes-list-type"] = "map"
    cells["x-kubernetes-list-map-keys"] = ["domain", "capability"]
    doc = base.document(
        plural=CAMPAIGN_PLURAL,
        kind=CAMPAIGN_KIND,
        singular=CAMPAIGN_SINGULAR,
        short_name=CAMPAIGN_SHORT_NAME,
        generated_by="coworkgym_operator.campaign.api.crd",
        description="Many CoworkEnvironments drawn from the taxonomy by quota, created in "
        "waves under a concurrency limit, with their coverage per cell in status.",
        printer_columns=PRINTER_COLUMNS,
        spec_schema=spec_schema,
        status_schema=base.model_schema(SynthesisCampaignStatus),
    )
    root = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    root["x-kubernetes-validations"] = [
        {"rule": f"self.metadata.name.size() <= {MAX_NAME}", "message": NAME_TOO_LONG}
    ]
    return doc


def render() -> str:
    return base.render_document(crd())


def main(argv: list[str]) -> int:
    return base.sync(render(), TARGETS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
