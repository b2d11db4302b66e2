"""Pure builders of a RolloutBatch's children: the batch volume, its NetworkPolicies, the
Secret of per-rollout gateway tokens, and the Jobs (fetch, rollout, verify, collect).
No I/O; every object carries an owner reference and a deterministic name.
docs/rollouts-on-kubernetes.md explains the layout; this module is its letter.

The batch volume (one PVC):
    packages/e<i>/private    the whole package (the user container only)
    packages/e<i>/verifier   the package without .user/, .patch/, solution/ (verify pod)
    rollouts/<id>/episode    trajectory.json, workspace/ (written by the user container)
    rollouts/<id>/verified   verification.json (written by the verify pod)
"""

from __future__ import annotations

import json
from typing import Any

from coworkgym.llm.signed_tokens import TokenClaims, mint
from coworkgym.spec import SandboxSettings
from coworkgym_operator.core.builders import (
    LABEL_EGRESS,
    LABEL_SANDBOX,
    Owner,
    child_name,
    container_security,
    job_manifest,
    resolve_sandbox,
    sandbox_pod,
    token_secret,
    volume_claim,
)
from coworkgym_operator.rollouts.api.types import (
    API_VERSION,
    BATCH_KIND,
    Policy,
    ResolvedEnvironment,
    RolloutBatchSpec,
)
from coworkgym_operator.rollouts.settings import BatchSettings

Manifest = dict[str, Any]
LABEL_BATCH = "coworkgym.dev/batch"
LABEL_ROLLOUT = "coworkgym.dev/rollout"
LABEL_STEP = "coworkgym.dev/step"  # fetch, rollout, verify, collect
AGENT_PORT = 7300  # the agent container's tool server, on the pod's loopback
TOKEN_BUDGET_ENV = "COWORKGYM_ROLLOUT_TOKEN_BUDGET"
SHARED = "/shared"  # the live workspace, as the user container mounts it
DEFAULT_WORKDIR = "/app"  # a package's workdir when the fetch pod reported none


def rollout_id(env_index: int, policy_index: int, sample: int) -> str:
    return f"e{env_index}-p{policy_index}-s{sample}"


def parse_rollout_id(rid: str) -> tuple[int, int, int]:
    e, p, s = rid.split("-")
    return int(e[1:]), int(p[1:]), int(s[1:])


def job_name(batch: str, step: str, rid: str | None = None) -> str:
    return child_name(batch, f"{step}-{rid}" if rid else step)


def volume_name(batch: str) -> str:
    return child_name(batch, "data")


def tokens_secret_name(batch: str) -> str:
    return child_name(batch, "gateway-tokens")


OWNER = Owner(API_VERSION, BATCH_KIND, LABEL_BATCH)


# ---- volume, policies, tokens ---------------------------------------------------------
def batch_volume(batch: Manifest, settings: BatchSettings) -> Manifest:
    return volume_claim(
        OWNER.metadata(batch, volume_name(batch["metadata"]["name"])),
        settings.volume_access_mode,
        settings.volume_size,
        settings.operator.storage_class,
    )


def network_policies(batch: Manifest, settings: BatchSettings) -> list[Manifest]:
    """Deny all for the batch's pods; rollout pods may reach the gateway only, fetch and
    collect pods the object store only; verify pods nothing."""
    return OWNER.isolation_policies(batch, settings.operator)


def token_scope(batch: Manifest, rid: str) -> str:
    meta = batch["metadata"]
    return f"{meta['namespace']}/{meta['name']}/{rid}"


def gateway_tokens(
    batch: Manifest, spec: RolloutBatchSpec, count: int, settings: BatchSettings
) -> Manifest:
    """One token per rollout of a model policy, keyed by rollout id (deterministic: the
    same batch gives the same Secret after an operator restart)."""
    data: dict[str, str] = {}
    for e in range(count):
        for p, policy in enumerate(spec.policies):
            if policy.base_url is None:
                continue
            for s in range(spec.samples_per_environment):
                rid = rollout_id(e, p, s)
                claims = TokenClaims(
                    scope=token_scope(batch, rid),
                    base_url=policy.base_url,
                    model=policy.model,
                    key_name=policy.api_key_secret or "",
                )
                data[rid] = mint(settings.gateway_signing_key, claims)
    return token_secret(OWNER.metadata(batch, tokens_secret_name(batch["metadata"]["name"])), data)


# ---- pods -----------------------------------------------------------------------------
def _sandbox(spec: RolloutBatchSpec, settings: BatchSettings) -> SandboxSettings:
    return resolve_sandbox(spec.sandbox, settings.operator)


SECURITY = container_security()


def _container(
    name: str,
    command: str,
    sandbox: SandboxSettings,
    settings: BatchSettings,
    mounts: list[tuple[str, str, bool]],
    env: list[Manifest],
    *,
    share: float = 1.0,
) -> Manifest:
    """``mounts``: (volume, path, writable); ``share`` of the sandbox's CPU and memory."""
    cpu, memory = sandbox.resources.cpu or "1", sandbox.resources.memory or "2Gi"
    requests = {"cpu": _scale(cpu, share), "memory": _scale(memory, share)}
    # the two containers of a rollout pod rarely work at once (the agent's commands run
    # while the user side waits for them): each may use the pod's whole CPU
    limits = {"cpu": cpu, "memory": _scale(memory, share)}
    return {
        "name": name,
        "image": sandbox.image,
        "imagePullPolicy": settings.operator.image_pull_policy,
        "command": ["python", "-m", "coworkgym.rollout.pod", command],
        "env": [{"name": "HOME", "value": "/tmp"}, *env],
        "resources": {"requests": requests, "limits": limits},
        "securityContext": SECURITY,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [_mount(v, p, w) for v, p, w in mounts],
    }


def _mount(volume: str, path: str, writable: bool) -> Manifest:
    """``volume`` is ``data:<subPath>`` for the batch volume, else an emptyDir's name."""
    name, _, sub = volume.partition(":")
    mount: Manifest = {"name": name, "mountPath": path, "readOnly": not writable}
    if sub:
        mount["subPath"] = sub
    return mount


def _scale(quantity: str, share: float) -> str:
    """A share of a CPU or memory quantity (e.g. 1 × 0.5 → 500m, 2Gi × 0.5 → 1024Mi)."""
    if share == 1.0:
        return quantity
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return f"{int(float(quantity[: -len(suffix)]) * factor * share / 2**20)}Mi"
    if quantity.endswith("m"):
        return f"{int(float(quantity[:-1]) * share)}m"
    return f"{int(float(quantity) * 1000 * share)}m"


def _job(
    batch: Manifest,
    spec: RolloutBatchSpec,
    settings: BatchSettings,
    *,
    step: str,
    rid: str | None,
    egress: str,
    containers: list[Manifest],
    deadline: int,
) -> Manifest:
    name = batch["metadata"]["name"]
    sandbox = _sandbox(spec, settings)
    labels = {LABEL_BATCH: name, LABEL_STEP: step, LABEL_SANDBOX: "true", LABEL_EGRESS: egress}
    if rid:
        labels[LABEL_ROLLOUT] = rid
    volumes: list[Manifest] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": volume_name(name)}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        *([{"name": "shared", "emptyDir": {"sizeLimit": "2Gi"}}] if step == "rollout" else []),
    ]
    account = settings.operator.sandbox_service_account
    pod = sandbox_pod(account, containers, volumes, sandbox, share_process_namespace=False)
    job_labels = {LABEL_STEP: step, **({LABEL_ROLLOUT: rid} if rid else {})}
    metadata = OWNER.metadata(batch, job_name(name, step, rid), **job_labels)
    # backoffLimit 0: a failed pod is an outcome (invalid, with the reason)
    return job_manifest(metadata, deadline, settings.operator.job_ttl_seconds, labels, pod)


def _input(value: Any) -> Manifest:
    return {"name": "COWORKGYM_POD_INPUT", "value": json.dumps(value, separators=(",", ":"))}


def _store_env(settings: BatchSettings) -> tuple[list[Manifest], list[Manifest]]:
    env = []
    if settings.operator.s3_endpoint:
        env.append({"name": "COWORKGYM_S3_ENDPOINT", "value": settings.operator.s3_endpoint})
    env_from = [{"secretRef": {"name": settings.operator.s3_secret}}]
    return env, env_from if settings.operator.s3_secret else []


def _store_job(
    batch: Manifest,
    spec: RolloutBatchSpec,
    settings: BatchSettings,
    step: str,
    mounts: list[tuple[str, str, bool]],
    wanted: dict[str, Any],
    deadline: int,
) -> Manifest:
    """A pod that holds the store's credentials (fetch, collect): it reaches the object
    store only, and reads ``wanted`` as its input."""
    env, env_from = _store_env(settings)
    sandbox = _sandbox(spec, settings)
    container = _container(step, step, sandbox, settings, mounts, [_input(wanted), *env])
    if env_from:
        container["envFrom"] = env_from
    return _job(
        batch, spec, settings, step=step, rid=None, egress="object-store",
        containers=[container], deadline=deadline,
    )  # fmt: skip


def fetch_job(
    batch: Manifest,
    spec: RolloutBatchSpec,
    environments: list[ResolvedEnvironment] | None,
    settings: BatchSettings,
) -> Manifest:
    """Fetch every package (or first the manifest) onto the batch volume: the only pod
    besides collect that holds storage credentials."""
    wanted: dict[str, Any] = (
        {"manifestUri": spec.environments.manifest_uri}
        if environments is None
        else {"environments": [{"name": e.name, "uri": e.uri} for e in environments]}
    )
    # it also makes every rollout's folders, as the pods' user: folders the kubelet makes
    # for a subPath belong to root
    wanted["policies"] = len(spec.policies)
    wanted["samples"] = spec.samples_per_environment
    mounts = [("data", "/data", True), ("tmp", "/tmp", True)]
    return _store_job(batch, spec, settings, "fetch", mounts, wanted, deadline=1800)


def _timeout(spec: RolloutBatchSpec, settings: BatchSettings) -> int:
    return spec.timeout_seconds or settings.default_timeout_seconds


def rollout_job(
    batch: Manifest,
    spec: RolloutBatchSpec,
    rid: str,
    environment: ResolvedEnvironment,
    settings: BatchSettings,
) -> Manifest:
    """One rollout: the user container (harness, user simulator, recorder; the package)
    and the agent container (the tool server; the live workspace only)."""
    e, p, s = parse_rollout_id(rid)
    policy: Policy = spec.policies[p]
    sandbox = _sandbox(spec, settings)
    episode_input = {
        "id": rid,
        "environment": environment.model_dump(mode="json", by_alias=True, exclude_none=True),
        "policy": policy.model_dump(mode="json", by_alias=True, exclude_none=True),
        "sample": s,
        "timeoutSeconds": spec.timeout_seconds,
        "agentUrl": f"http://127.0.0.1:{AGENT_PORT}",
        "gatewayUrl": settings.gateway_url if policy.base_url else None,
    }
    user_env = [_input(episode_input), {"name": "COWORKGYM_SHARED_DIR", "value": SHARED}]
    if policy.base_url:
        user_env.append(
            {
                "name": "COWORKGYM_GATEWAY_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {"name": tokens_secret_name(batch["metadata"]["name"]),
                                     "key": rid}
                },
            }
        )  # fmt: skip
    user = _container(
        "user",
        "episode",
        sandbox,
        settings,
        [
            (f"data:packages/e{e}/private", "/package", False),
            (f"data:rollouts/{rid}/episode", "/record", True),
            ("shared", SHARED, True),
            ("tmp", "/tmp", True),
        ],
        user_env,
        share=0.5,
    )
    # the workspace volume at the package's workdir, so the agent's commands see their
    # files where the instruction says they are (absolute paths included)
    workdir = environment.workdir or DEFAULT_WORKDIR
    agent = _container(
        "agent",
        "agent",
        sandbox,
        settings,
        [("shared", workdir, True), ("tmp", "/tmp", True)],
        [
            {"name": "COWORKGYM_AGENT_PORT", "value": str(AGENT_PORT)},
            {"name": "COWORKGYM_AGENT_WORKSPACE", "value": workdir},
        ],
        share=0.5,
    )
    egress = "gateway" if policy.base_url else "none"
    deadline = _timeout(spec, settings) + settings.pod_deadline_margin_seconds
    return _job(
        batch, spec, settings, step="rollout", rid=rid, egress=egress,
        containers=[user, agent], deadline=deadline,
    )  # fmt: skip


def verify_job(
    batch: Manifest, spec: RolloutBatchSpec, rid: str, settings: BatchSettings
) -> Manifest:
    """Verification apart: the collected workspace (read-only), the package's verifier
    view, no network, no secrets."""
    e, _, _ = parse_rollout_id(rid)
    container = _container(
        "verify",
        "verify",
        _sandbox(spec, settings),
        settings,
        [
            (f"data:rollouts/{rid}/episode", "/episode", False),
            (f"data:packages/e{e}/verifier", "/package", False),
            (f"data:rollouts/{rid}/verified", "/verified", True),
            ("tmp", "/tmp", True),
        ],
        [_input({"id": rid})],
    )
    return _job(
        batch, spec, settings, step="verify", rid=rid, egress="none",
        containers=[container], deadline=1800,
    )  # fmt: skip


def collect_job(
    batch: Manifest, spec: RolloutBatchSpec, ids: list[str], settings: BatchSettings
) -> Manifest:
    """Merge records and verifications, filter, upload: the second pod with credentials."""
    wanted = {"outputUri": spec.output.uri, "filter": spec.filter.to_wire(), "ids": ids}
    mounts = [("data:rollouts", "/rollouts", False), ("tmp", "/tmp", True)]
    return _store_job(batch, spec, settings, "collect", mounts, wanted, deadline=3600)


__all__ = [
    "AGENT_PORT",
    "LABEL_BATCH",
    "LABEL_ROLLOUT",
    "LABEL_STEP",
    "batch_volume",
    "child_name",
    "collect_job",
    "fetch_job",
    "gateway_tokens",
    "job_name",
    "network_policies",
    "parse_rollout_id",
    "rollout_id",
    "rollout_job",
    "tokens_secret_name",
    "verify_job",
    "volume_name",
]
