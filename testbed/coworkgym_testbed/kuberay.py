"""KubeRay on the test-bed: its operator as a process beside the control plane, its CRDs
(RayCluster, RayJob, RayService) installed first. Optional: `up --kuberay`,
`make testbed-up KUBERAY=1`, COWORKGYM_TESTBED_KUBERAY=1 for a pytest session, or
`Testbed.add_kuberay()` on a running test-bed (what the node e2e does).

The operator talks to the API server on loopback with the admin kubeconfig, like the
controller-manager. It reaches a Ray head's dashboard (job status, job submission in
HTTPMode) through the API server's service proxy (`--use-kubernetes-proxy`): there is no
cluster DNS on the host side. The Ray pods themselves find their head by its Service name
through the node's CoreDNS (node/services.py).
"""

from __future__ import annotations

import json

from .binaries import kuberay_crds, which
from .components import LOOPBACK, Cluster, Component, http_ok

CRD_NAMES = ("rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io")


class KubeRayOperator(Component):
    name = "kuberay-operator"
    needs = ("kube-apiserver",)
    ports = ("kuberay-metrics", "kuberay-probe")
    stop_timeout = 10.0

    def prepare(self, c: Cluster) -> None:
        install_crds(c)

    def argv(self, c: Cluster) -> list[str]:
        return [
            str(which("kuberay-operator")),
            f"--kubeconfig={c.kubeconfig}",
            f"--metrics-addr={LOOPBACK}:{c.ports['kuberay-metrics']}",
            f"--health-probe-bind-address={LOOPBACK}:{c.ports['kuberay-probe']}",
            "--enable-leader-election=false",
            "--use-kubernetes-proxy",
            "--log-stdout-encoder=console",
        ]

    def ready(self, c: Cluster) -> bool:
        return http_ok(f"http://{LOOPBACK}:{c.ports['kuberay-probe']}/readyz") and crds_established(
            c
        )


def install_crds(c: Cluster) -> None:
    """Apply the CRDs server-side: each is larger than the 256 KiB that a client-side apply
    may keep in its last-applied annotation."""
    import subprocess

    args = [str(which("kubectl")), f"--kubeconfig={c.kubeconfig}", "apply", "--server-side"]
    args += ["--force-conflicts", "--field-manager=coworkgym-testbed"]
    for crd in kuberay_crds():
        args += ["-f", str(crd)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"installing the KubeRay CRDs failed: {done.stderr.strip()}")


def crds_established(c: Cluster) -> bool:
    import urllib.error
    import urllib.request

    for name in CRD_NAMES:
        url = f"{c.api_url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        try:
            with urllib.request.urlopen(url, timeout=2, context=c.tls()) as r:
                crd = json.load(r)
        except (urllib.error.URLError, OSError):
            return False
        conditions = crd.get("status", {}).get("conditions", [])
        if not any(x["type"] == "Established" and x["status"] == "True" for x in conditions):
            return False
    return True


def kuberay_components() -> tuple[Component, ...]:
    """The operator (its Ray pods find their head through the node's CoreDNS, which every node
    runs: node/services.py)."""
    return (KubeRayOperator(),)
