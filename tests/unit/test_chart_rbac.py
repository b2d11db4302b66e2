"""The chart's operator Role lets the operator list and watch every resource it registers a
kopf handler or index on (each kind is driven by its children's events): a watch without
the rights fails only at run time, over and over, on a real cluster. Read from kopf's own
registry after importing every kind's handlers, against the rules in the chart's template
(no helm: the rules are plain YAML lines between template directives)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RBAC = Path(__file__).resolve().parents[2] / "charts" / "cowork-gym" / "templates" / "rbac.yaml"
RULE = re.compile(
    r"- apiGroups: \[(?P<groups>[^\]]*)\]\s*\n\s*resources: \[(?P<resources>[^\]]*)\]\s*\n"
    r"\s*verbs: \[(?P<verbs>[^\]]*)\]"
)


def chart_rights() -> dict[tuple[str, str], set[str]]:
    """(group, resource) → verbs, over every rule of the Role (each branch of a template
    conditional counted: the conditional parts are asserted by the test-bed's chart tests)."""
    rights: dict[tuple[str, str], set[str]] = {}
    for rule in RULE.finditer(RBAC.read_text()):
        groups = [g.strip().strip('"') for g in rule["groups"].split(",")]
        resources = [r.strip() for r in rule["resources"].split(",")]
        verbs = {v.strip() for v in rule["verbs"].split(",")}
        for group in groups:
            for resource in resources:
                rights.setdefault((group, resource), set()).update(verbs)
    return rights


def watched() -> set[tuple[str, str]]:
    """(group, plural) of every resource the operator's kopf handlers and indices watch."""
    from kopf._core.intents import registries

    import coworkgym_operator.controllers  # noqa: F401  (registers every kind)

    registry = registries.get_default_registry()
    found = set()
    for handlers in (registry._indexing, registry._watching, registry._changing):
        for handler in handlers.get_all_handlers():
            selector = handler.selector
            if selector is not None and selector.any_name:
                found.add((selector.group or "", str(selector.any_name)))
    return found


def test_every_watched_resource_may_be_listed_and_watched() -> None:
    rights = chart_rights()
    resources = watched()
    # every kind and its children: the four kinds, Jobs, pods, claims, policies, a round's
    # server (Deployment, Service)
    assert {("coworkgym.dev", "trainingruns"), ("apps", "deployments"), ("", "services")} <= (
        resources
    )
    missing = {
        f"{group or 'core'}/{resource}": sorted(
            {"list", "watch"} - rights.get((group, resource), set())
        )
        for group, resource in resources
        if not {"list", "watch"} <= rights.get((group, resource), set())
    }
    assert not missing, f"the chart's Role lacks list/watch: {missing}"


@pytest.mark.parametrize("resource", [("", "secrets"), ("", "configmaps")])
def test_nothing_secret_is_watched_or_readable(resource: tuple[str, str]) -> None:
    assert resource not in watched()
    assert not {"get", "list", "watch"} & chart_rights().get(resource, set())


# what the TrainingRun controller creates, by kind: (API group, resource)
TRAINING_KINDS = {
    "Job": ("batch", "jobs"),
    "RayJob": ("ray.io", "rayjobs"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
    "Deployment": ("apps", "deployments"),
    "Service": ("", "services"),
    "RolloutBatch": ("coworkgym.dev", "rolloutbatches"),
}


def test_every_child_of_a_training_run_may_be_created() -> None:
    """Built by the controller's own builders: the training Job and its NetworkPolicy, the
    RayJob, a round's server, its policy and its RolloutBatch (deleted too, but for the
    batches: the garbage collector removes those with the run)."""
    from coworkgym_operator.rollouts.api.types import ResolvedEnvironment
    from coworkgym_operator.training.api.types import TrainingRunSpec
    from coworkgym_operator.training.builders.network import training_policy
    from coworkgym_operator.training.builders.rayjob import build_rayjob
    from coworkgym_operator.training.builders.rounds import (
        round_batch,
        serving_deployment,
        serving_policy,
        serving_service,
    )
    from coworkgym_operator.training.builders.run import training_job
    from coworkgym_operator.training.settings import TrainingSettings

    settings = TrainingSettings()
    spec = {"objective": "grpo", "model": "s3://m/tiny", "rounds": 2, "output": {"uri": "s3://o"},
            "rollout": {"environments": {"names": ["env-a"]}}}  # fmt: skip
    run = {"metadata": {"name": "tiny", "namespace": "ml", "uid": "u-1"}, "spec": spec}
    one_run = {**run, "spec": {**spec, "rounds": 1, "data": {"uri": "s3://d/t.jsonl"}}}
    parsed = TrainingRunSpec.model_validate(spec)
    environments = [ResolvedEnvironment(name="env-a", uri="s3://r/env-a")]
    children = [
        training_policy(run, settings),
        training_job(run, parsed, "s3://d/kept.jsonl", 1, settings),
        build_rayjob(one_run, settings),
        serving_policy(run, settings),
        serving_deployment(run, parsed, 0, "s3://m/tiny", settings),
        serving_service(run, 0),
        round_batch(run, parsed, 0, 1, "http://10.0.0.9:8000/v1", environments, None),
    ]
    assert {child["kind"] for child in children} == set(TRAINING_KINDS)
    rights = chart_rights()
    for child in children:
        resource = TRAINING_KINDS[child["kind"]]
        verbs = {"create"} if child["kind"] == "RolloutBatch" else {"create", "delete"}
        assert verbs <= rights.get(resource, set()), f"{child['kind']}: {verbs}"
