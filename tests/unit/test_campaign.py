"""SynthesisCampaign: the models, the plan drawn from the taxonomy, the CRD generated from
them, and the pure reconcile (waves under the concurrency limit, the failure threshold,
coverage and counts)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from coworkgym.spec import EnvironmentSpec, spec_problems
from coworkgym.taxonomy import cell_of
from coworkgym_operator.campaign.api import crd as campaign_crd
from coworkgym_operator.campaign.api.types import SynthesisCampaignSpec
from coworkgym_operator.campaign.reconcile.children import (
    LABEL_CAMPAIGN,
    child_manifest,
    plan,
    served_cells,
    unserved,
)
from coworkgym_operator.campaign.reconcile.plan import (
    CampaignObserved,
    ChildState,
    reconcile_campaign,
)

SERVED = sorted(served_cells(3))


def campaign(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "camp", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": spec,
        "status": status or {},
    }


def cells(*pairs: tuple[str, str, int]) -> dict[str, Any]:
    return {"quotas": {"cells": [{"domain": d, "capability": c, "count": n} for d, c, n in pairs]}}


def problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        SynthesisCampaignSpec.model_validate(spec)
    return spec_problems(caught.value, "spec.")


# ---- the models -----------------------------------------------------------------------------
def test_quotas_are_cells_or_a_total_and_name_what_is_wrong() -> None:
    assert "exactly one of cells" in problems({"quotas": {}})[0]
    both = {
        "quotas": {
            "total": 3,
            "cells": [{"domain": "finance", "capability": "debugging", "count": 1}],
        }
    }
    assert "exactly one of cells" in problems(both)[0]
    (unknown,) = problems(cells(("cooking", "debugging", 1)))
    assert (
        unknown.startswith("spec.quotas.cells[0].domain: ")
        and "'cooking' is not a scenario domain" in unknown
    )
    (twice,) = problems(cells(("finance", "reconciliation", 1), ("finance", "reconciliation", 2)))
    assert "finance × reconciliation is listed twice" in twice
    filters = {
        "quotas": {
            "cells": [{"domain": "finance", "capability": "reconciliation", "count": 1}],
            "domains": ["finance"],
        }
    }
    assert "narrow a balanced total" in problems(filters)[0]


def test_a_cell_no_family_serves_is_refused_with_the_cell_named() -> None:
    d, c = SERVED[0]
    spec = SynthesisCampaignSpec.model_validate(cells((d, c, 2), ("software", "scheduling", 1)))
    (problem,) = unserved(spec)
    assert problem.startswith("spec.quotas.cells[1]: software × scheduling is served by no")
    assert "served capabilities of software: debugging" in problem
    llm = {"kind": "llm", "model": "m", "baseUrl": "http://gw/v1"}
    spec_llm = SynthesisCampaignSpec.model_validate(
        {**cells(("software", "scheduling", 1)), "backends": {"builder": llm}}
    )
    assert unserved(spec_llm) == []  # an LLM Builder may build any cell
    narrowed = SynthesisCampaignSpec.model_validate(
        {"quotas": {"total": 4, "domains": ["software"], "capabilities": ["scheduling"]}}
    )
    assert "no cell of domains ['software'] × capabilities ['scheduling']" in unserved(narrowed)[0]


# ---- the plan -------------------------------------------------------------------------------
def test_a_total_is_balanced_over_the_served_cells_and_deterministic() -> None:
    spec = SynthesisCampaignSpec.model_validate(
        {"quotas": {"total": 2 * len(SERVED) + 5}, "seed": 7}
    )
    planned = plan(spec)
    counts = Counter(p.cell for p in planned)
    assert set(counts) == set(SERVED)
    assert set(counts.values()) == {2, 3}
    # the first wave already spreads: no cell twice before every cell once
    assert len({p.cell for p in planned[: len(SERVED)]}) == len(SERVED)
    assert [p.task for p in plan(spec)] == [p.task for p in planned]  # same seed, same tasks
    for p in planned:
        assert cell_of(p.task.labels) == p.cell


def test_cells_take_turns_in_the_plan() -> None:
    (a, b) = SERVED[:2]
    spec = SynthesisCampaignSpec.model_validate(cells((*a, 3), (*b, 1)))
    assert [p.cell for p in plan(spec)] == [a, b, a, a]


def test_a_child_is_an_environment_owned_by_the_campaign() -> None:
    spec = SynthesisCampaignSpec.model_validate(
        {
            **cells((*SERVED[0], 1)),
            "budget": {"maxIterations": 2},
            "release": {"uri": "s3://bucket/envs"},
        }
    )
    child = child_manifest(campaign(spec.model_dump(by_alias=True)), spec, plan(spec)[0])
    assert child["metadata"]["name"] == "camp-00000"
    assert child["metadata"]["labels"][LABEL_CAMPAIGN] == "camp"
    (owner,) = child["metadata"]["ownerReferences"]
    assert owner["kind"] == "SynthesisCampaign" and owner["uid"] == "u-1" and owner["controller"]
    env = EnvironmentSpec.model_validate(child["spec"])
    assert env.budget.max_iterations == 2 and env.release.uri == "s3://bucket/envs"


# ---- the reconcile --------------------------------------------------------------------------
def step(spec: dict[str, Any], children: list[ChildState], status: dict[str, Any] | None = None):
    return reconcile_campaign(campaign(spec, status), CampaignObserved(children=children))


def test_waves_never_put_more_than_the_limit_in_flight() -> None:
    spec = {"quotas": {"total": 10}, "concurrency": 3}
    first = step(spec, [])
    assert [c["metadata"]["name"] for c in first.create] == [
        "camp-00000",
        "camp-00001",
        "camp-00002",
    ]
    assert first.status["phase"] == "Running" and first.status["counts"]["inFlight"] == 3
    # a restart before the status was written: the children exist, nothing is made twice
    again = step(spec, [ChildState(i, "Building") for i in range(3)])
    assert again.create == []
    # one released: one more
    released = [ChildState(0, "Released"), ChildState(1, "Building"), ChildState(2, "Pending")]
    nxt = step(spec, released, first.status)
    assert [c["metadata"]["name"] for c in nxt.create] == ["camp-00003"]
    assert nxt.status["progress"] == "1/10" and nxt.status["counts"]["released"] == 1


def test_a_finished_campaign_reports_coverage_counts_and_defects() -> None:
    (a, b) = SERVED[:2]
    spec = cells((*a, 2), (*b, 1))
    done = [
        ChildState(0, "Released", a),
        ChildState(1, "Rejected", b, ("LEAK_EXPECTED_VALUE",)),
        ChildState(2, "Released", a),
    ]
    out = step(spec, done, {"counts": {"created": 3}})
    status = out.status
    assert status["phase"] == "Succeeded" and out.finished == "succeeded"
    assert status["counts"] | {"byPhase": None} == {
        "planned": 3, "created": 3, "inFlight": 0, "released": 2, "rejected": 1,
        "failed": 0, "missing": 0, "byPhase": None,
    }  # fmt: skip
    coverage = {(c["domain"], c["capability"]): c for c in status["coverage"]}
    assert coverage[a] | {"domain": "", "capability": ""} == {
        "domain": "", "capability": "", "planned": 2, "created": 2, "released": 2, "failed": 0
    }  # fmt: skip
    assert coverage[b]["failed"] == 1
    assert status["defects"] == [{"code": "LEAK_EXPECTED_VALUE", "count": 1}]
    assert status["failureRatio"] == pytest.approx(1 / 3, abs=1e-4)
    kinds = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert kinds["Complete"] == ("True", "Succeeded") and kinds["Created"] == ("True", "AllCreated")


def test_past_the_failure_threshold_no_child_is_created_and_the_campaign_fails() -> None:
    spec = {"quotas": {"total": 20}, "concurrency": 4,
            "failureThreshold": {"maxFailureRatio": 0.5, "minFinished": 3}}  # fmt: skip
    children = [ChildState(0, "Failed"), ChildState(1, "Failed"), ChildState(2, "Released"),
                ChildState(3, "Building")]  # fmt: skip
    out = step(spec, children, {"counts": {"created": 4}})
    assert out.create == []
    assert out.status["phase"] == "Stopping"
    assert [e[1] for e in out.events] == ["FailureRateExceeded"]
    kinds = {c["type"]: c for c in out.status["conditions"]}
    assert kinds["FailureRateExceeded"]["status"] == "True"
    assert (
        "2 of 3 finished children rejected or failed (67%)"
        in kinds["FailureRateExceeded"]["message"]
    )
    assert kinds["Created"]["reason"] == "Stopped"
    # the last one in flight finishes: Failed, and the event is not repeated
    children[3] = ChildState(3, "Released")
    end = step(spec, children, out.status)
    assert end.create == [] and end.status["phase"] == "Failed" and end.finished == "failed"
    assert [e[1] for e in end.events] == ["Failed"]
    # below the minimum finished, the ratio is not judged
    early = step(
        spec, [ChildState(0, "Failed"), ChildState(1, "Failed")], {"counts": {"created": 2}}
    )
    assert len(early.create) == 4


def test_a_deleted_child_is_missing_not_redone() -> None:
    spec = {"quotas": {"total": 3}, "concurrency": 3}
    out = step(
        spec, [ChildState(0, "Released"), ChildState(2, "Released")], {"counts": {"created": 3}}
    )
    assert out.create == [] and out.status["counts"]["missing"] == 1
    assert out.status["phase"] == "Succeeded"


def test_a_quota_the_taxonomy_does_not_serve_fails_before_any_child() -> None:
    out = step(cells(("software", "scheduling", 2)), [])
    assert out.create == [] and out.status["phase"] == "Failed"
    planned = next(c for c in out.status["conditions"] if c["type"] == "Planned")
    assert planned["reason"] == "QuotaNotServed"
    assert "software × scheduling" in planned["message"]
    assert [e[1] for e in out.events] == ["QuotaNotServed"]
    assert step(cells(("software", "scheduling", 2)), [], out.status).events == []


# ---- the CRD --------------------------------------------------------------------------------
def test_the_files_on_disk_match_the_models() -> None:
    fix = "run python -m coworkgym_operator.campaign.api.crd"
    assert campaign_crd.DEFINITION.main(["--check"]) == 0, fix
    copies = [t.read_text() for t in campaign_crd.DEFINITION.targets]
    assert copies[0] == copies[1] == campaign_crd.DEFINITION.render()


def test_the_crd_refuses_unknown_cells_by_enum_and_duplicates_by_key() -> None:
    schema = campaign_crd.DEFINITION.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    cells_node = spec["properties"]["quotas"]["properties"]["cells"]
    assert cells_node["x-kubernetes-list-map-keys"] == ["domain", "capability"]
    item = cells_node["items"]["properties"]
    assert "finance" in item["domain"]["enum"] and "debugging" in item["capability"]["enum"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert any('"software/debugging": true' in r for r in rules)
