"""Harbor's podman environment, able to run a task that allows its phases no network.

Harbor's Docker and podman environments enforce ``allow_internet = false`` with an egress
sidecar built from a gost image, after probing the kernel with an alpine image; no registry
here serves either, so Harbor rejects such a task ("providers must enforce the requested
network policy or reject the task"). This environment enforces it as Docker itself does:
the ``main`` service joins no network (``network_mode: none``, Harbor's own compose overlay
for it). An allowlist is still refused, as the plain podman environment refuses it, and a
task whose phases need different policies is refused by Harbor itself (the policy is fixed
at start). Everything else (building, the agent, the verifier, the reward) is Harbor's.

Used by benchmarks/harbor_runner.py as ``harbor run --env harbor_offline_podman:OfflinePodman``.
"""

from __future__ import annotations

from pathlib import Path

from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.docker import COMPOSE_NO_NETWORK_PATH
from harbor.environments.podman import PodmanEnvironment
from harbor.models.task.config import NetworkMode


class OfflinePodman(PodmanEnvironment):  # type: ignore[misc]
    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return super().capabilities.model_copy(update={"disable_internet": True})

    @property
    def _docker_compose_paths(self) -> list[Path]:
        paths = list(super()._docker_compose_paths)
        if self.network_policy.network_mode == NetworkMode.NO_NETWORK:
            paths.append(COMPOSE_NO_NETWORK_PATH)
        return paths
