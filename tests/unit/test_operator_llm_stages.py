"""The operator's LLM-backed stages: their Jobs reach only the gateway with the token of the
environment and role (from a Secret, never a key); an operator without a gateway fails
such a stage saying so; the model calls a stage pod reports add up in status.llmUsage."""

from __future__ import annotations

from typing import Any

from coworkgym.llm.signed_tokens import verify
from coworkgym.spec import EnvironmentSpec
from coworkgym_operator.core.builders import LABEL_EGRESS
from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.builders import (
    gateway_tokens,
    gateway_tokens_name,
    network_policies,
    stage_job,
)
from coworkgym_operator.environment.reconcile.loop import Observed, Plan, reconcile
from tests.support.builders import environment_spec

GATEWAY = OperatorSettings(
    gateway_url="http://10.96.0.20:8000/v1",
    gateway_signing_key="signing",
    environment_token_budget=300_000,
)
UPSTREAM = "http://vllm.models.svc:8000/v1"


def llm_spec(*roles: str) -> EnvironmentSpec:
    backend = {"kind": "llm", "model": "qwen", "baseUrl": UPSTREAM, "apiKeySecret": "vllm"}
    return environment_spec(backends=dict.fromkeys(roles, backend))


def resource(spec: EnvironmentSpec, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "coworkgym.dev/v1alpha1",
        "kind": "CoworkEnvironment",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": spec.to_wire(),
        "status": status or {},
    }


def container(job: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return found


def after(env: dict[str, Any], plan: Plan) -> dict[str, Any]:
    return {**env, "status": plan.status}


def test_an_llm_stage_job_reaches_the_gateway_with_its_token_from_a_secret() -> None:
    spec = llm_spec("builder")
    env = resource(spec)
    job = stage_job(env, spec, "builder", 0, 1, [], GATEWAY)
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"][LABEL_EGRESS] == "gateway"
    variables = {v["name"]: v for v in container(job)["env"]}
    assert variables["COWORKGYM_GATEWAY_URL"]["value"] == GATEWAY.gateway_url
    ref = variables["COWORKGYM_GATEWAY_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": gateway_tokens_name("demo"), "key": "builder"}
    assert not [v for v in container(job)["env"] if "KEY" in v["name"]]
    # the role's own directories, where its prompt names them
    mounts = {m["mountPath"] for m in container(job)["volumeMounts"]}
    assert {"/build", "/app", "/resources"} <= mounts
    empty = {v["name"] for v in pod["spec"]["volumes"] if "emptyDir" in v}
    assert {"llm-build", "llm-app", "llm-resources"} <= empty
    # a procedural verifier of the same spec gets neither the gateway nor its egress
    verifier = stage_job(env, spec, "verifier", 0, 1, [], GATEWAY)
    assert verifier["spec"]["template"]["metadata"]["labels"][LABEL_EGRESS] == "none"
    assert "COWORKGYM_GATEWAY_TOKEN" not in {v["name"] for v in container(verifier)["env"]}
    # the only way out of an egress=gateway pod: the gateway's pods, on its port
    fence = next(p for p in network_policies(env, GATEWAY) if p["metadata"]["name"].endswith(
        "-egress-gateway"))  # fmt: skip
    assert fence["spec"]["egress"] == [
        {"to": [{"podSelector": {"matchLabels": {"app": "llm-gateway"}}}],
         "ports": [{"protocol": "TCP", "port": 8000}]}
    ]  # fmt: skip


def test_the_tokens_name_the_environment_its_budget_and_the_upstream_key_by_name() -> None:
    spec = llm_spec("builder", "verifier")
    secret = gateway_tokens(resource(spec), spec, GATEWAY)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert sorted(secret["stringData"]) == ["builder", "verifier"]
    claims = verify("signing", secret["stringData"]["verifier"])
    assert claims is not None
    assert (claims.scope, claims.role, claims.token_budget) == ("ns/demo/u-1", "verifier", 300_000)
    assert (claims.base_url, claims.model, claims.key_name) == (UPSTREAM, "qwen", "vllm")
    assert verify("another key", secret["stringData"]["builder"]) is None
    # deterministic: an operator restarted mid-stage makes the same Secret
    assert gateway_tokens(resource(spec), spec, GATEWAY) == secret


def test_the_llm_stage_job_comes_with_the_tokens_secret() -> None:
    plan = reconcile(resource(llm_spec("builder")), Observed(), GATEWAY)
    kinds = [f"{c['kind']}/{c['metadata']['name']}" for c in plan.create]
    assert kinds[-2:] == ["Secret/demo-gateway-tokens", "Job/demo-builder-i0-a1"]
    procedural = reconcile(resource(environment_spec()), Observed(), GATEWAY)
    assert "Secret" not in {c["kind"] for c in procedural.create}


def test_an_operator_without_a_gateway_fails_an_llm_stage_at_once_saying_so() -> None:
    plan = reconcile(resource(llm_spec("builder")), Observed(), OperatorSettings())
    assert plan.status["phase"] == "Failed" and plan.finished == "failed"
    assert "gateway.enabled" in plan.status["message"]
    assert not [c for c in plan.create if c["kind"] in ("Job", "Secret")]


def test_the_model_calls_each_stage_reports_add_up_per_role_in_the_status() -> None:
    spec = llm_spec("builder", "verifier")
    env = after(resource(spec), reconcile(resource(spec), Observed(), GATEWAY))
    used = {"requests": 5, "prompt_tokens": 500, "completion_tokens": 100}
    built = JobObservation("demo-builder-i0-a1", "succeeded", {"ok": True, "usage": used})
    plan = reconcile(env, Observed(built), GATEWAY)
    assert plan.llm_usage is not None and plan.llm_usage.prompt_tokens == 500
    env = after(env, plan)
    # the verifier's first try fails (its calls count all the same), the second succeeds
    failed = {"ok": False, "retryable": True, "error": "upstream_unavailable: 503",
              "usage": {"requests": 1, "prompt_tokens": 40, "completion_tokens": 0}}  # fmt: skip
    first = JobObservation("demo-verifier-i0-a1", "failed", failed)
    env = after(env, reconcile(env, Observed(first), GATEWAY))
    ok = {"ok": True, "usage": {"requests": 4, "prompt_tokens": 400, "completion_tokens": 80}}
    second = JobObservation("demo-verifier-i0-a2", "succeeded", ok)
    plan = reconcile(env, Observed(second), GATEWAY)
    assert plan.status["llmUsage"] == [
        {"role": "builder", "requests": 5, "promptTokens": 500, "completionTokens": 100},
        {"role": "verifier", "requests": 5, "promptTokens": 440, "completionTokens": 80},
    ]
    # a reconcile that sees the same finished Job again (the status already moved on)
    # counts nothing twice
    again = reconcile(after(env, plan), Observed(second), GATEWAY)
    assert again.llm_usage is None and again.status["llmUsage"] == plan.status["llmUsage"]


def test_a_malformed_usage_report_is_ignored() -> None:
    spec = llm_spec("builder")
    env = after(resource(spec), reconcile(resource(spec), Observed(), GATEWAY))
    bad = {"ok": True, "usage": {"requests": "many"}}
    built = JobObservation("demo-builder-i0-a1", "succeeded", bad)
    plan = reconcile(env, Observed(built), GATEWAY)
    assert plan.llm_usage is None and plan.status["llmUsage"] == []
