"""What the RolloutBatch controller needs beyond the operator's settings: where rollout pods
reach the LLM gateway and the key it signs their tokens with (set by the Helm chart)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from coworkgym_operator.core.settings import OperatorSettings


@dataclass(frozen=True)
class BatchSettings:
    operator: OperatorSettings = field(default_factory=OperatorSettings)
    # The OpenAI base URL rollout pods send model requests to: the gateway's Service (by
    # address: the pods have no DNS), e.g. http://10.96.0.20:8000/v1. "" = no gateway:
    # only the nop and oracle harnesses can run.
    gateway_url: str = ""
    # The HMAC key of per-rollout gateway tokens (the gateway holds the same one).
    gateway_signing_key: str = field(default="", repr=False)
    # Most tokens one rollout may spend through the gateway.
    rollout_token_budget: int = 2_000_000
    # The batch volume (one per batch): ReadWriteOnce keeps a batch on one node; a
    # ReadWriteMany StorageClass spreads it.
    volume_access_mode: str = "ReadWriteOnce"
    volume_size: str = "5Gi"
    # Extra seconds a rollout pod may run past the rollout's own time limit.
    pod_deadline_margin_seconds: int = 300
    default_timeout_seconds: int = 1800
    # How long an endpoint has to answer the operator's reachability probe.
    probe_timeout_seconds: float = 5.0

    @classmethod
    def from_env(cls) -> BatchSettings:
        env = os.environ
        return cls(
            operator=OperatorSettings.from_env(),
            gateway_url=env.get("COWORKGYM_GATEWAY_URL", ""),
            gateway_signing_key=env.get("COWORKGYM_GATEWAY_SIGNING_KEY", ""),
            rollout_token_budget=int(env.get("COWORKGYM_ROLLOUT_TOKEN_BUDGET", 2_000_000)),
            volume_access_mode=env.get("COWORKGYM_BATCH_VOLUME_ACCESS_MODE", "ReadWriteOnce"),
            volume_size=env.get("COWORKGYM_BATCH_VOLUME_SIZE", "5Gi"),
            probe_timeout_seconds=float(env.get("COWORKGYM_PROBE_TIMEOUT_SECONDS", 5.0)),
        )
