"""Operator settings, from the environment (set by the Helm chart)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from coworkgym.spec import SandboxSettings

# What happens to an environment's role volumes (PVCs) once it is Released, Rejected or
# Failed: Delete frees the storage at once; Retain keeps them (to inspect the role
# outputs) until the environment is deleted.
VolumeRetention = Literal["Delete", "Retain"]
VOLUME_RETENTIONS: tuple[VolumeRetention, ...] = ("Delete", "Retain")


@dataclass(frozen=True)
class OperatorSettings:
    sandbox_service_account: str = "cowork-gym-sandbox"
    role_image: str = "ghcr.io/cowork-gym/role-sandbox:0.1.0"
    # Never: images are preloaded on the nodes (air-gapped clusters, the test-bed).
    image_pull_policy: str = "IfNotPresent"
    storage_class: str | None = None
    volume_size: str = "1Gi"
    s3_secret: str | None = None  # Secret with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
    s3_endpoint: str | None = None
    release_uri: str | None = None  # default target when a spec sets none
    store_cidr: str = "0.0.0.0/0"  # where the release Job may send packages
    store_port: int = 443
    gateway_labels: dict[str, str] = field(default_factory=lambda: {"app": "llm-gateway"})
    gateway_port: int = 8000
    # LLM-backed roles: the gateway's OpenAI base URL (the chart's gateway Service; a host
    # name is resolved to its address, as the stage pods get no DNS), the HMAC key the
    # operator signs each environment's token with, and the tokens an environment may use.
    # "" = no gateway: an environment with an llm backend fails, saying so.
    gateway_url: str = ""
    gateway_signing_key: str = field(default="", repr=False)
    environment_token_budget: int = 2_000_000
    job_ttl_seconds: int = 3600
    # How often work in flight (a child made or going, a status written) and a pod that
    # cannot start yet (past its grace, or while its Job has not reached the watch) are
    # looked at again; the first retry of a reconcile that raised.
    reconcile_interval: float = 3.0
    # Every kind is reconciled on events (its spec, its children's) and at the deadlines
    # the clock sets (core/wakeups.py); this sweep, the only timer, looks again at each
    # unfinished object that changed since it settled, in case an event was missed.
    resync_interval: float = 300.0
    # A stage whose pod has not started this long after its Job was created, while its pod
    # reports why (image pull, scheduling, volume binding) or has not been scheduled at
    # all, is ended and retried like a failed one, instead of waiting for the stage timeout.
    stage_start_grace_seconds: float = 120.0
    # How often, while the operator works, freed memory is handed back to the system
    # (core/memory.py); 0: never.
    malloc_trim_interval: float = 30.0
    volume_retention: VolumeRetention = "Delete"
    sandbox_defaults: SandboxSettings = field(default_factory=SandboxSettings)

    @classmethod
    def from_env(cls) -> OperatorSettings:
        env = os.environ
        gateway = dict(
            pair.split("=", 1)
            for pair in env.get("COWORKGYM_GATEWAY_SELECTOR", "app=llm-gateway").split(",")
            if "=" in pair
        )
        return cls(
            sandbox_service_account=env.get("COWORKGYM_SANDBOX_SA", cls.sandbox_service_account),
            role_image=env.get("COWORKGYM_ROLE_IMAGE", cls.role_image),
            image_pull_policy=env.get("COWORKGYM_IMAGE_PULL_POLICY", cls.image_pull_policy),
            storage_class=env.get("COWORKGYM_STORAGE_CLASS") or None,
            volume_size=env.get("COWORKGYM_VOLUME_SIZE", cls.volume_size),
            s3_secret=env.get("COWORKGYM_S3_SECRET") or None,
            s3_endpoint=env.get("COWORKGYM_S3_ENDPOINT") or None,
            release_uri=env.get("COWORKGYM_RELEASE_URI") or None,
            store_cidr=env.get("COWORKGYM_STORE_CIDR", cls.store_cidr),
            store_port=int(env.get("COWORKGYM_STORE_PORT", cls.store_port)),
            gateway_labels=gateway,
            gateway_port=int(env.get("COWORKGYM_GATEWAY_PORT", cls.gateway_port)),
            gateway_url=env.get("COWORKGYM_GATEWAY_URL", ""),
            gateway_signing_key=env.get("COWORKGYM_GATEWAY_SIGNING_KEY", ""),
            environment_token_budget=int(
                env.get("COWORKGYM_ENVIRONMENT_TOKEN_BUDGET", cls.environment_token_budget)
            ),
            reconcile_interval=float(env.get("COWORKGYM_RECONCILE_INTERVAL", 3.0)),
            resync_interval=float(env.get("COWORKGYM_RESYNC_INTERVAL", cls.resync_interval)),
            stage_start_grace_seconds=float(
                env.get("COWORKGYM_STAGE_START_GRACE_SECONDS", cls.stage_start_grace_seconds)
            ),
            malloc_trim_interval=float(
                env.get("COWORKGYM_MALLOC_TRIM_INTERVAL_SECONDS", cls.malloc_trim_interval)
            ),
            volume_retention=_retention(env.get("COWORKGYM_VOLUME_RETENTION", "Delete")),
            # the chart's `sandbox` values (camelCase JSON), applied where a spec sets none
            sandbox_defaults=SandboxSettings.model_validate_json(
                env.get("COWORKGYM_SANDBOX_DEFAULTS") or "{}"
            ),
        )


def _retention(value: str) -> VolumeRetention:
    if value not in VOLUME_RETENTIONS:
        raise ValueError(
            f"COWORKGYM_VOLUME_RETENTION={value!r}: expected one of {', '.join(VOLUME_RETENTIONS)}"
            " (the chart's sandboxVolumes.retention)"
        )
    return value


# read once, at import: every kind's handlers share the operator's settings
SETTINGS = OperatorSettings.from_env()
