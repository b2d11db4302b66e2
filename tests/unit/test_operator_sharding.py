"""Label-sharded operators: the replica's watches select its shard server-side, every child
an environment makes carries the shard of its owner (pods included, so the replica that
owns the Job also sees its pod), and a campaign spreads its children over its shards."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from kopf._cogs.structs.references import Resource

from coworkgym_operator.campaign.api.types import SynthesisCampaignSpec
from coworkgym_operator.campaign.reconcile.children import child_manifest, plan, served_cells
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.core.sharding import LABEL_SHARD, shard_from_env, watch_only_shard
from coworkgym_operator.environment.reconcile.loop import Observed, reconcile
from tests.support.builders import environment_spec

SHARD = "b"


def environment(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "CoworkEnvironment",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "labels": labels},
        "spec": environment_spec().to_wire(),
        "status": {},
    }


def test_the_shard_comes_from_the_environment_and_must_be_a_label_value() -> None:
    assert shard_from_env({}) is None
    assert shard_from_env({"COWORKGYM_SHARD": " "}) is None
    assert shard_from_env({"COWORKGYM_SHARD": "shard-7"}) == "shard-7"
    with pytest.raises(ValueError, match="COWORKGYM_SHARD='a b' is not a label value"):
        shard_from_env({"COWORKGYM_SHARD": "a b"})
    with pytest.raises(ValueError, match="COWORKGYM_SHARD"):
        shard_from_env({"COWORKGYM_SHARD": "x" * 64})


def test_every_watch_but_the_peering_selects_the_shard_on_the_server() -> None:
    settings = kopf.OperatorSettings()
    watch_only_shard(settings, SHARD)
    selectors = settings.watching.label_selectors
    for group, plural in [("coworkgym.dev", "coworkenvironments"), ("batch", "jobs"),
                          ("", "pods"), ("", "persistentvolumeclaims"),
                          ("networking.k8s.io", "networkpolicies")]:  # fmt: skip
        resource = Resource(group, "v1", plural)
        assert selectors.collect(resource) == [f"{LABEL_SHARD}={SHARD}"], plural
    assert selectors.collect(Resource("kopf.dev", "v1", "kopfpeerings")) == []
    unsharded = kopf.OperatorSettings()
    watch_only_shard(unsharded, None)
    assert unsharded.watching.label_selectors.collect(Resource("batch", "v1", "jobs")) == []


def test_an_environments_children_and_their_pods_carry_its_shard() -> None:
    plan_ = reconcile(environment({LABEL_SHARD: SHARD}), Observed(), OperatorSettings())
    assert plan_.create
    for child in plan_.create:
        assert child["metadata"]["labels"][LABEL_SHARD] == SHARD, child["metadata"]["name"]
        if child["kind"] == "Job":
            pod_labels = child["spec"]["template"]["metadata"]["labels"]
            assert pod_labels[LABEL_SHARD] == SHARD
    unsharded = reconcile(environment({}), Observed(), OperatorSettings())
    assert all(LABEL_SHARD not in c["metadata"]["labels"] for c in unsharded.create)


def campaign(spec: SynthesisCampaignSpec, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "SynthesisCampaign",
        "metadata": {"name": "camp", "namespace": "ns", "uid": "u-1", "labels": labels},
        "spec": spec.model_dump(by_alias=True),
    }


def test_a_campaign_spreads_its_children_over_its_shards_or_passes_its_own_on() -> None:
    cell = sorted(served_cells(3))[0]
    quotas = {"cells": [{"domain": cell[0], "capability": cell[1], "count": 5}]}
    spread = SynthesisCampaignSpec.model_validate({"quotas": quotas, "shards": ["a", "b"]})
    shards = [
        child_manifest(campaign(spread, {}), spread, p)["metadata"]["labels"][LABEL_SHARD]
        for p in plan(spread)
    ]
    assert shards == ["a", "b", "a", "b", "a"]
    own = SynthesisCampaignSpec.model_validate({"quotas": quotas})
    children = [child_manifest(campaign(own, {LABEL_SHARD: "c"}), own, p) for p in plan(own)]
    assert {c["metadata"]["labels"][LABEL_SHARD] for c in children} == {"c"}


def test_a_shard_that_is_not_a_label_value_is_refused_naming_the_field() -> None:
    cell = sorted(served_cells(3))[0]
    quotas = {"cells": [{"domain": cell[0], "capability": cell[1], "count": 1}]}
    with pytest.raises(ValueError, match="shards"):
        SynthesisCampaignSpec.model_validate({"quotas": quotas, "shards": ["no spaces"]})
