"""The RolloutBatch reconcile, pure: bad input stops the batch before any pod, a whole batch
runs through a simulated cluster (Jobs appear, finish with termination messages), counts
and pass rates add up, reconciling twice gives the same plan, a restart duplicates
nothing, and the pods are built as docs/rollouts-on-kubernetes.md says."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from coworkgym.llm.signed_tokens import verify
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.rollouts import builders as bb
from coworkgym_operator.rollouts.api.types import ResolvedEnvironment
from coworkgym_operator.rollouts.reconcile.plan import BatchObserved, BatchPlan, reconcile_batch
from coworkgym_operator.rollouts.settings import BatchSettings

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
SETTINGS = BatchSettings(
    operator=OperatorSettings(s3_secret="s3-creds", s3_endpoint="http://10.244.0.1:9000"),
    gateway_url="http://10.244.0.9:8000/v1",
    gateway_signing_key="test-signing-key",
)
ENVS = [ResolvedEnvironment(name=n, uri=f"s3://pkgs/{n}", digest=n * 4) for n in ("alpha", "beta")]
Manifest = dict[str, Any]


def batch(**spec: Any) -> Manifest:
    body: Manifest = {
        "environments": {"selector": {"matchLabels": {"suite": "demo"}}},
        "policies": [{"harness": "tool-calling", "model": "m", "baseUrl": "http://llm:8000/v1"}],
        "samplesPerEnvironment": 2,
        "concurrency": 3,
        "output": {"uri": "s3://out/run1"},
    }
    body.update(spec)
    meta = {"name": "rb1", "namespace": "ns", "uid": "uid-1", "generation": 1}
    return {"metadata": meta, "spec": body, "status": {}}


def observed(**fields: Any) -> BatchObserved:
    defaults: dict[str, Any] = {"released": ENVS, "probed": True, "now": NOW}
    return BatchObserved(**{**defaults, **fields})


def conditions(plan: BatchPlan) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def names(manifests: list[Manifest]) -> list[str]:
    return [f"{m['kind']}/{m['metadata']['name']}" for m in manifests]


# ---- bad input: a condition with the reason, and no pod --------------------------------
def test_a_selector_that_matches_nothing_completes_with_no_environments() -> None:
    plan = reconcile_batch(batch(), observed(released=[]), SETTINGS)
    assert conditions(plan)["Failed"] == ("True", "NoEnvironments")
    assert conditions(plan)["Complete"] == ("True", "Failed")
    assert conditions(plan)["Resolved"] == ("False", "NoEnvironments")
    assert "suite=demo" in plan.status["message"] and plan.status["phase"] == "Failed"
    assert plan.create == [] and plan.finished == "failed"
    assert plan.events[0][:2] == ("Warning", "NoEnvironments")


def test_a_named_environment_not_released_is_named() -> None:
    spec = {"environments": {"names": ["alpha", "gamma"]}}
    plan = reconcile_batch(batch(**spec), observed(not_released={"gamma": "Building"}), SETTINGS)
    assert conditions(plan)["Failed"] == ("True", "EnvironmentsNotReleased")
    assert "gamma (Building)" in plan.status["message"] and plan.create == []


def test_an_unreachable_endpoint_completes_naming_it_and_starts_nothing() -> None:
    down = {"http://llm:8000/v1": "ConnectError: connection refused"}
    plan = reconcile_batch(batch(), observed(unreachable=down), SETTINGS)
    assert conditions(plan)["EndpointsReachable"] == ("False", "EndpointUnreachable")
    assert conditions(plan)["Complete"] == ("True", "Failed")
    message = plan.status["message"]
    assert "policies[0] (tool-calling/m) at http://llm:8000/v1" in message
    assert "connection refused" in message and plan.create == []


def test_before_the_probe_nothing_starts() -> None:
    plan = reconcile_batch(batch(), observed(probed=False), SETTINGS)
    assert plan.create == [] and plan.status["step"] == "probe"
    assert conditions(plan)["EndpointsReachable"] == ("Unknown", "Probing")


def test_a_model_policy_without_a_gateway_is_refused() -> None:
    plan = reconcile_batch(batch(), observed(), replace(SETTINGS, gateway_url=""))
    assert conditions(plan)["Failed"] == ("True", "NoGateway") and plan.create == []


def test_a_spec_the_models_refuse_is_invalid_spec_naming_the_field() -> None:
    plan = reconcile_batch(batch(samplesPerEnvironment=0), observed(), SETTINGS)
    assert conditions(plan)["Failed"] == ("True", "InvalidSpec")
    assert "spec.samplesPerEnvironment" in plan.status["message"] and plan.create == []


# ---- a whole batch through a simulated cluster ----------------------------------------
class FakeCluster:
    """Jobs as the controller would observe them; each step's pod 'ends' on tick()."""

    def __init__(self, results: dict[str, dict[str, Any]] | None = None) -> None:
        self.children: dict[str, Manifest] = {}
        self.done: set[str] = set()
        self.results = results or {}
        self.created: list[str] = []

    def apply(self, plan: BatchPlan) -> None:
        for kind, name in plan.delete:
            self.children.pop(f"{kind}/{name}", None)
        for m in plan.create:
            key = f"{m['kind']}/{m['metadata']['name']}"
            assert key not in self.children, f"{key} created twice"
            self.children[key] = m
            self.created.append(key)

    def tick(self) -> None:
        self.done |= {k for k in self.children if k.startswith("Job/")}

    def result(self, job: str) -> dict[str, Any]:
        if job in self.results:
            return self.results[job]
        if job.endswith("-fetch"):
            return {"ok": True}
        if job.endswith("-collect"):
            return {"ok": True, "kept": 3, "uri": "s3://out/run1", "funnel": [
                {"rule": "verified_outcome", "dropped": 1, "kept": 3,
                 "reasons": {"invalid": 1}}]}  # fmt: skip
        if "-rollout-" in job:
            return {"ok": True, "verify": True, "tokens": 100, "seconds": 2.0}
        return {"ok": True, "valid": True, "passed": job.endswith("s0"), "reward": 1.0}

    def observe(self, b: Manifest) -> BatchObserved:
        from coworkgym_operator.rollouts.reconcile.plan import jobs_to_observe

        jobs = {}
        for name in jobs_to_observe(b):
            key = f"Job/{name}"
            if key not in self.children:
                jobs[name] = JobObservation(name, "missing")
            elif key in self.done:
                result = self.result(name)
                state = "succeeded" if result.get("ok") else "failed"
                jobs[name] = JobObservation(name, state, result, reason="BackoffLimitExceeded")
            else:
                jobs[name] = JobObservation(name, "running")
        return observed(jobs=jobs, existing_children=frozenset(self.children))


def run(b: Manifest, cluster: FakeCluster, rounds: int = 30) -> Manifest:
    for _ in range(rounds):
        plan = reconcile_batch(b, cluster.observe(b), SETTINGS)
        again = reconcile_batch(b, cluster.observe(b), SETTINGS)
        assert again.status == plan.status and names(again.create) == names(plan.create)
        cluster.apply(plan)
        b = {**b, "status": plan.status}
        if plan.status["phase"] in ("Succeeded", "Failed"):
            return b
        cluster.tick()
    raise AssertionError(f"did not finish: {b['status'].get('message')}")


def test_a_batch_runs_fetch_rollouts_verifications_and_collect() -> None:
    cluster = FakeCluster()
    final = run(batch(), cluster)["status"]
    assert final["phase"] == "Succeeded"
    assert final["counts"] == {
        "total": 4, "pending": 0, "running": 0, "succeeded": 4, "invalid": 0, "kept": 3
    }  # fmt: skip
    assert final["summary"] == "4/0/4" and final["tokens"] == 400
    assert final["passRates"] == [
        {"policy": "tool-calling/m", "finished": 4, "valid": 4, "passed": 2, "passRate": 0.5}
    ]
    assert final["outcomes"] == {
        "e0-p0-s0": "passed", "e0-p0-s1": "failed", "e1-p0-s0": "passed", "e1-p0-s1": "failed"
    }  # fmt: skip
    assert final["funnel"][0]["reasons"] == {"invalid": 1}
    assert {c["type"]: c["reason"] for c in final["conditions"]}["Complete"] == "Succeeded"
    jobs = [k for k in cluster.created if k.startswith("Job/")]
    assert len(jobs) == 1 + 4 + 4 + 1 and len(set(jobs)) == len(jobs)
    # the Jobs, the volume and the tokens go once the trajectories are in the store
    assert [k for k in cluster.children if k.startswith("Job/")] == []
    assert "PersistentVolumeClaim/rb1-data" not in cluster.children
    assert "Secret/rb1-gateway-tokens" not in cluster.children


def test_concurrency_bounds_the_rollouts_in_flight() -> None:
    b = batch(concurrency=1)
    cluster = FakeCluster()
    for _ in range(6):
        plan = reconcile_batch(b, cluster.observe(b), SETTINGS)
        cluster.apply(plan)
        b = {**b, "status": plan.status}
        # a finished rollout Job stays until its verification is in: count pods that run
        running = [
            k
            for k in cluster.children
            if ("-rollout-" in k or "-verify-" in k) and k not in cluster.done
        ]
        assert len(running) <= 1 and plan.status["counts"]["running"] <= 1
        cluster.tick()


def test_an_endpoint_that_fails_mid_rollout_makes_that_one_invalid_and_the_batch_goes_on() -> None:
    failing = {
        "rb1-rollout-e1-p0-s1": {
            "ok": True, "verify": False, "termination": "model_error",
            "reason": "model_error: upstream unreachable", "tokens": 5,
        },
        "rb1-rollout-e0-p0-s1": {"ok": False, "error": "OOMKilled"},
    }  # fmt: skip
    final = run(batch(), FakeCluster(failing))["status"]
    assert final["phase"] == "Succeeded"
    assert final["counts"]["succeeded"] == 2 and final["counts"]["invalid"] == 2
    assert final["outcomes"]["e1-p0-s1"] == "invalid: model_error: upstream unreachable"
    assert final["outcomes"]["e0-p0-s1"] == "invalid: infrastructure: OOMKilled"
    # invalid is not 0: the pass rate is over valid rollouts only
    assert final["passRates"][0]["valid"] == 2 and final["passRates"][0]["passRate"] == 1.0


def test_a_restarted_operator_recreates_only_what_is_missing() -> None:
    b = batch()
    cluster = FakeCluster()
    for _ in range(5):  # until the first rollouts are created (and still run)
        plan = reconcile_batch(b, cluster.observe(b), SETTINGS)
        cluster.apply(plan)
        b = {**b, "status": plan.status}
        if plan.status["running"]:
            break
        cluster.tick()
    assert b["status"]["step"] == "rollout"
    # the operator died after creating children but before writing the status: the same
    # old status again creates nothing that exists (FakeCluster refuses a duplicate)
    stale = copy.deepcopy(b)
    plan = reconcile_batch(stale, cluster.observe(stale), SETTINGS)
    cluster.apply(plan)
    # a running rollout's Job deleted under the batch is made again, under the same name
    b = {**b, "status": plan.status}
    rid = next(r for r, where in plan.status["running"].items() if where == "rollout")
    victim = f"Job/rb1-rollout-{rid}"
    del cluster.children[victim]
    cluster.done.discard(victim)
    plan = reconcile_batch(b, cluster.observe(b), SETTINGS)
    assert names(plan.create) == [victim]


class DeletesLost(FakeCluster):
    """The operator is killed after each status write, before its deletes."""

    def apply(self, plan: BatchPlan) -> None:
        super().apply(replace(plan, delete=[]))


def test_jobs_whose_deletes_a_restart_lost_go_at_the_next_reconcile_even_once_finished() -> None:
    cluster = DeletesLost()
    b = run(batch(), cluster)
    assert b["status"]["phase"] == "Succeeded"
    assert len([k for k in cluster.children if k.startswith("Job/")]) == 10  # all still there
    plan = reconcile_batch(b, cluster.observe(b), SETTINGS)  # the restarted operator's
    FakeCluster.apply(cluster, plan)
    assert [k for k in cluster.children if k.startswith("Job/")] == []
    assert plan.status == b["status"] and plan.create == []


def test_a_manifest_batch_learns_its_environments_from_the_fetch_pod() -> None:
    b = batch(environments={"manifestUri": "s3://pkgs/manifest.jsonl"})
    results = {
        "rb1-fetch": {
            "ok": True,
            "environments": [{"name": "alpha", "uri": "s3://pkgs/alpha", "digest": "d1"}],
        }
    }
    final = run(b, FakeCluster(results))["status"]
    assert final["environments"] == [{"name": "alpha", "uri": "s3://pkgs/alpha", "digest": "d1"}]
    assert final["counts"]["total"] == 2


def test_an_empty_manifest_is_no_environments() -> None:
    b = batch(environments={"manifestUri": "s3://pkgs/manifest.jsonl"})
    final = run(b, FakeCluster({"rb1-fetch": {"ok": True, "environments": []}}))["status"]
    assert {c["type"]: c["reason"] for c in final["conditions"]}["Failed"] == "NoEnvironments"


def test_a_failed_fetch_fails_the_batch_with_its_error() -> None:
    results = {"rb1-fetch": {"ok": False, "error": "s3://pkgs/alpha: NoSuchKey"}}
    final = run(batch(), FakeCluster(results))["status"]
    assert {c["type"]: c["reason"] for c in final["conditions"]}["Failed"] == "FetchFailed"
    assert "NoSuchKey" in final["message"]


# ---- the pods -------------------------------------------------------------------------
@pytest.fixture
def rollout_pod() -> Manifest:
    b = batch()
    from coworkgym_operator.rollouts.api.types import RolloutBatchSpec

    spec = RolloutBatchSpec.model_validate(b["spec"])
    pod: Manifest = bb.rollout_job(b, spec, "e1-p0-s1", ENVS[1], SETTINGS)["spec"]["template"]
    return pod


def test_the_agent_container_mounts_the_live_workspace_only(rollout_pod: Manifest) -> None:
    spec = rollout_pod["spec"]
    agent = next(c for c in spec["containers"] if c["name"] == "agent")
    assert [m["mountPath"] for m in agent["volumeMounts"]] == ["/app", "/tmp"]  # the workdir
    assert all(m["name"] != "data" for m in agent["volumeMounts"])
    assert "envFrom" not in agent and all("valueFrom" not in e for e in agent["env"])
    assert agent["securityContext"]["readOnlyRootFilesystem"] is True
    assert agent["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    assert spec["shareProcessNamespace"] is False
    assert rollout_pod["metadata"]["labels"][bb.LABEL_EGRESS] == "gateway"


def test_the_user_container_holds_the_package_and_a_token_never_a_key(
    rollout_pod: Manifest,
) -> None:
    user = next(c for c in rollout_pod["spec"]["containers"] if c["name"] == "user")
    mounts = {m["mountPath"]: m for m in user["volumeMounts"]}
    assert mounts["/package"]["subPath"] == "packages/e1/private" and mounts["/package"]["readOnly"]
    assert mounts["/record"]["subPath"] == "rollouts/e1-p0-s1/episode"
    token = next(e for e in user["env"] if e["name"] == "COWORKGYM_GATEWAY_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "rb1-gateway-tokens", "key": "e1-p0-s1"}
    assert "envFrom" not in user  # no storage credentials in a rollout pod


def test_only_fetch_and_collect_get_storage_credentials() -> None:
    from coworkgym_operator.rollouts.api.types import RolloutBatchSpec

    b = batch()
    spec = RolloutBatchSpec.model_validate(b["spec"])
    jobs = {
        "fetch": bb.fetch_job(b, spec, ENVS, SETTINGS),
        "collect": bb.collect_job(b, spec, ["e0-p0-s0"], SETTINGS),
        "verify": bb.verify_job(b, spec, "e0-p0-s0", SETTINGS),
        "rollout": bb.rollout_job(b, spec, "e0-p0-s0", ENVS[0], SETTINGS),
    }
    with_creds = {
        step
        for step, job in jobs.items()
        for c in job["spec"]["template"]["spec"]["containers"]
        if c.get("envFrom")
    }
    assert with_creds == {"fetch", "collect"}
    verify_pod = jobs["verify"]["spec"]["template"]
    assert verify_pod["metadata"]["labels"][bb.LABEL_EGRESS] == "none"
    mounts = {m["mountPath"]: m for m in verify_pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["/package"]["subPath"] == "packages/e0/verifier"
    assert mounts["/episode"]["readOnly"] is True


def test_tokens_are_per_rollout_signed_and_carry_no_key() -> None:
    from coworkgym_operator.rollouts.api.types import RolloutBatchSpec

    b = batch(policies=[
        {"harness": "tool-calling", "model": "m", "baseUrl": "http://llm/v1",
         "apiKeySecret": "openai"},
        {"harness": "oracle", "model": "oracle"},
    ])  # fmt: skip
    spec = RolloutBatchSpec.model_validate(b["spec"])
    secret = bb.gateway_tokens(b, spec, 2, SETTINGS)
    assert sorted(secret["stringData"]) == ["e0-p0-s0", "e0-p0-s1", "e1-p0-s0", "e1-p0-s1"]
    claims = verify("test-signing-key", secret["stringData"]["e1-p0-s1"])
    assert claims is not None and claims.scope == "ns/rb1/e1-p0-s1"
    assert claims.key_name == "openai" and claims.base_url == "http://llm/v1"
    assert verify("another-key", secret["stringData"]["e1-p0-s1"]) is None
    assert secret == bb.gateway_tokens(b, spec, 2, SETTINGS)  # deterministic


def test_child_names_fit_in_a_label_and_stay_unique() -> None:
    long = "a" * 60
    one = bb.job_name(long, "rollout", "e12-p3-s511")
    two = bb.job_name(long + "b", "rollout", "e12-p3-s511")
    assert len(one) <= 63 and len(two) <= 63 and one != two
    assert bb.job_name("rb1", "verify", "e0-p0-s0") == "rb1-verify-e0-p0-s0"


def test_network_policies_fence_each_kind_of_pod() -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in bb.network_policies(batch(), SETTINGS)}
    assert policies["rb1-deny-all"]["egress"] == [] and policies["rb1-deny-all"]["ingress"] == []
    gateway = policies["rb1-egress-gateway"]
    assert gateway["podSelector"]["matchLabels"][bb.LABEL_EGRESS] == "gateway"
    assert gateway["egress"][0]["to"][0]["podSelector"]["matchLabels"] == {"app": "llm-gateway"}


# ---- pods that cannot start -----------------------------------------------------------
def test_a_rollout_pod_that_cannot_start_becomes_invalid_after_the_grace() -> None:
    from datetime import timedelta

    from coworkgym_operator.core.pods import PodProblem, PodStart

    cluster = FakeCluster()
    b = batch()
    for _ in range(5):  # into the rollouts
        plan = reconcile_batch(b, cluster.observe(b), SETTINGS)
        cluster.apply(plan)
        b = {**b, "status": plan.status}
        if plan.status["running"]:
            break
        cluster.tick()
    rid = sorted(plan.status["running"])[0]
    name = f"rb1-rollout-{rid}"
    problem = PodStart(problem=PodProblem("ImagePull", "ErrImageNeverPull", "not present"))
    created = NOW - timedelta(seconds=SETTINGS.operator.stage_start_grace_seconds - 1)
    waiting = JobObservation(name, "running", created_at=created, start=problem)
    base = cluster.observe(b)
    early = reconcile_batch(b, replace(base, jobs={**base.jobs, name: waiting}), SETTINGS)
    assert rid in early.status["running"]  # within the grace: it may still start
    late = replace(waiting, created_at=NOW - timedelta(hours=1))
    plan = reconcile_batch(b, replace(base, jobs={**base.jobs, name: late}), SETTINGS)
    outcome = plan.status["outcomes"][rid]
    assert outcome.startswith("invalid: infrastructure: the rollout pod did not start")
    assert "ErrImageNeverPull" in outcome
    assert ("Job", name) in plan.delete and plan.status["phase"] == "Running"


def test_a_fetch_pod_that_cannot_start_fails_the_batch() -> None:
    from datetime import timedelta

    from coworkgym_operator.core.pods import PodStart

    b = batch()
    plan = reconcile_batch(b, observed(), SETTINGS)
    b = {**b, "status": plan.status}
    unscheduled = JobObservation(
        "rb1-fetch", "running", created_at=NOW - timedelta(hours=1), start=PodStart()
    )
    plan = reconcile_batch(b, observed(jobs={"rb1-fetch": unscheduled}), SETTINGS)
    assert conditions(plan)["Fetched"] == ("False", "FetchFailed")
    assert "not scheduled" in plan.status["message"] and ("Job", "rb1-fetch") in plan.delete


def test_the_status_patch_removes_what_the_status_no_longer_has() -> None:
    from coworkgym_operator.core.kube import merge_patch

    before = {"running": {"e0-p0-s0": "verify", "e0-p0-s1": "rollout"}, "phase": "Running"}
    after = {"running": {"e0-p0-s1": "rollout"}, "phase": "Running", "tokens": 5}
    assert merge_patch(before, after) == {"running": {"e0-p0-s0": None}, "tokens": 5}
    assert merge_patch(after, after) == {}
