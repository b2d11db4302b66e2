"""Pure builders of the child objects of a CoworkEnvironment: volumes, NetworkPolicies and
the sandbox Job of each stage. No I/O; every object carries an owner reference.

Volumes: one PVC per role per environment. The Builder writes only ``builder``; the
Verifier Constructor mounts ``builder`` read-only and writes only ``verifier``; the Issue
Detector and the release step mount both read-only plus ``scratch``. Why PVCs rather than
object storage: the roles then need no credentials at all, and read-only is enforced by
the kubelet's mount, not by the role's good behaviour. Only the release Job talks to S3.

A Builder, Verifier Constructor or Issue Detector review whose backend is ``llm`` calls the
LLM gateway (its pod
labelled egress=gateway, the one destination its NetworkPolicy admits) with a token the
operator signed for this environment and role (a Secret, read by the pod's environment):
the token names the upstream, the model, the name of the key the gateway holds, and the
environment's token budget, which the gateway enforces. The pod never holds a key.
"""

from __future__ import annotations

import json

from coworkgym.detector.defects import Defect
from coworkgym.llm.signed_tokens import TokenClaims, mint
from coworkgym.spec import EnvironmentSpec, SandboxSettings
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import (
    LABEL_EGRESS,
    LABEL_GENERATION,
    LABEL_SANDBOX,
    Manifest,
    Owner,
    container_security,
    job_manifest,
    resolve_sandbox,
    sandbox_pod,
    token_secret,
    volume_claim,
)
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.api.types import KIND

ROLE_VOLUMES = ("builder", "verifier", "scratch")
# stage → (volume, writable) it mounts; anything not listed is not mounted at all
MOUNTS: dict[str, list[tuple[str, bool]]] = {
    "builder": [("builder", True)],
    "verifier": [("builder", False), ("verifier", True)],
    "detector": [("builder", False), ("verifier", False), ("scratch", True)],
    "release": [("scratch", False)],
}
# an LLM-backed role's own directories, at the paths its prompt names (coworkgym.roles.llm:
# a pod cannot bind-mount, so they are emptyDirs there)
LLM_DIRS: dict[str, tuple[str, ...]] = {
    "builder": ("build", "app", "resources"),
    "verifier": ("builder", "verifier", "app"),
    "detector": ("package", "scratch"),  # its LLM review (its checks need no model)
}
LABEL_ENV = "coworkgym.dev/environment"
LABEL_STAGE = "coworkgym.dev/stage"


# ---- a CoworkEnvironment's children -----------------------------------------------------
OWNER = Owner(f"{GROUP}/{VERSION}", KIND, LABEL_ENV)


def volume_name(env_name: str, role: str) -> str:
    return f"{env_name}-{role}"


def volume_claims(env: Manifest, settings: OperatorSettings) -> list[Manifest]:
    name = env["metadata"]["name"]
    return [
        volume_claim(
            OWNER.metadata(env, volume_name(name, role), **{"coworkgym.dev/volume": role}),
            "ReadWriteOnce",
            settings.volume_size,
            settings.storage_class,
        )
        for role in ROLE_VOLUMES
    ]


def network_policies(env: Manifest, settings: OperatorSettings) -> list[Manifest]:
    """Deny everything for this environment's sandbox pods; then allow only the LLM gateway
    for pods labelled egress=gateway, and only the object store for the release pod."""
    return OWNER.isolation_policies(env, settings)


def llm_stages(spec: EnvironmentSpec) -> list[str]:
    """The stages whose role the spec backs by a model (they need the gateway)."""
    return [stage for stage in LLM_DIRS if getattr(spec.backends, stage).kind == "llm"]


def gateway_tokens_name(env_name: str) -> str:
    return f"{env_name}-gateway-tokens"


def token_scope(env: Manifest) -> str:
    """What the gateway charges the environment's model calls to: the uid too, so that an
    environment made again under the same name starts with its whole budget."""
    meta = env["metadata"]
    return f"{meta['namespace']}/{meta['name']}/{meta.get('uid', '')}"


def gateway_tokens(env: Manifest, spec: EnvironmentSpec, settings: OperatorSettings) -> Manifest:
    """One signed token per LLM-backed stage, keyed by stage (deterministic: the same
    environment gives the same Secret after an operator restart)."""
    data: dict[str, str] = {}
    for stage in llm_stages(spec):
        backend = getattr(spec.backends, stage)
        claims = TokenClaims(
            scope=token_scope(env),
            base_url=str(backend.base_url),
            model=str(backend.model),
            key_name=backend.api_key_secret or "",
            role=stage,
            token_budget=settings.environment_token_budget,
        )
        data[stage] = mint(settings.gateway_signing_key, claims)
    return token_secret(OWNER.metadata(env, gateway_tokens_name(env["metadata"]["name"])), data)


def job_name(env_name: str, stage: str, iteration: int, attempt: int) -> str:
    """Deterministic, so a restarted operator finds the Job it created instead of adding one."""
    return f"{env_name}-{stage}-i{iteration}-a{attempt}"


def stage_input(
    env: Manifest, spec: EnvironmentSpec, iteration: int, feedback: list[Defect]
) -> str:
    return json.dumps(
        {
            "name": env["metadata"]["name"],
            "spec": spec.to_wire(),
            "iteration": iteration,
            "feedback": [d.model_dump(mode="json", exclude={"evidence"}) for d in feedback],
        },
        separators=(",", ":"),
    )


def _sandbox(spec: EnvironmentSpec, settings: OperatorSettings) -> SandboxSettings:
    return resolve_sandbox(spec.sandbox, settings)


def stage_job(
    env: Manifest,
    spec: EnvironmentSpec,
    stage: str,
    iteration: int,
    attempt: int,
    feedback: list[Defect],
    settings: OperatorSettings,
) -> Manifest:
    name = env["metadata"]["name"]
    sandbox = _sandbox(spec, settings)
    uses_model = stage in llm_stages(spec)
    egress = {"release": "object-store"}.get(stage, "gateway" if uses_model else "none")
    pod_labels = {LABEL_ENV: name, LABEL_STAGE: stage, LABEL_SANDBOX: "true", LABEL_EGRESS: egress}
    env_vars: list[Manifest] = [
        {"name": "COWORKGYM_STAGE_INPUT", "value": stage_input(env, spec, iteration, feedback)},
        {"name": "HOME", "value": "/tmp"},
    ]
    env_vars += [
        {"name": f"COWORKGYM_{v.upper()}_DIR", "value": f"/work/{v}"} for v in ROLE_VOLUMES
    ]
    env_from: list[Manifest] = []
    if uses_model:
        env_vars.append({"name": "COWORKGYM_GATEWAY_URL", "value": settings.gateway_url})
        token = {"name": gateway_tokens_name(name), "key": stage}
        env_vars.append({"name": "COWORKGYM_GATEWAY_TOKEN", "valueFrom": {"secretKeyRef": token}})
    if stage == "release":
        if settings.s3_endpoint:
            env_vars.append({"name": "COWORKGYM_S3_ENDPOINT", "value": settings.s3_endpoint})
        if settings.release_uri:
            env_vars.append({"name": "COWORKGYM_RELEASE_URI", "value": settings.release_uri})
        if settings.s3_secret:  # only the release Job ever sees storage credentials
            env_from.append({"secretRef": {"name": settings.s3_secret}})
    resources = {"cpu": sandbox.resources.cpu, "memory": sandbox.resources.memory}
    role_dirs = LLM_DIRS[stage] if uses_model else ()
    container: Manifest = {
        "name": "role",
        "image": sandbox.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["python", "-m", "coworkgym.roles.job", stage],
        "env": env_vars,
        "resources": {"requests": resources, "limits": resources},
        "securityContext": container_security(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": vol, "mountPath": f"/work/{vol}", "readOnly": not writable}
            for vol, writable in MOUNTS[stage]
        ]
        + [{"name": "tmp", "mountPath": "/tmp"}]
        + [{"name": f"llm-{d}", "mountPath": f"/{d}"} for d in role_dirs],
    }
    if env_from:
        container["envFrom"] = env_from
    volumes: list[Manifest] = [
        {
            "name": vol,
            "persistentVolumeClaim": {
                "claimName": volume_name(name, vol),
                "readOnly": not writable,
            },
        }
        for vol, writable in MOUNTS[stage]
    ]
    volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}})
    volumes += [{"name": f"llm-{d}", "emptyDir": {"sizeLimit": "1Gi"}} for d in role_dirs]
    pod_spec = sandbox_pod(settings.sandbox_service_account, [container], volumes, sandbox)
    metadata = OWNER.metadata(
        env,
        job_name(name, stage, iteration, attempt),
        **{
            LABEL_STAGE: stage,
            "coworkgym.dev/iteration": str(iteration),
            LABEL_GENERATION: str(env["metadata"].get("generation", 0)),
        },
    )
    # backoffLimit 0: retries are the loop's decision, not the Job's
    deadline = spec.budget.stage_timeout_seconds
    return job_manifest(metadata, deadline, settings.job_ttl_seconds, pod_labels, pod_spec)
