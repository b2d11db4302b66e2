"""The node's processes: containerd, the kubelet, kube-router's firewall, the volume
provisioner and the relays; kube-proxy and CoreDNS are in services.py. What they leave on the
machine is host.py's business."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from pathlib import Path

from ..binaries import which
from ..components import LOOPBACK, SERVICE_CIDR, Cluster, Component, http_ok
from ..pki import NODE_IP, NODE_NAME
from .host import (
    CGROUP_ROOT,
    KUBELET_CHAINS,
    cgroups_up,
    claim_machine,
    cni_config,
    containerd_socket,
    ctr,
    netns_now,
    network_up,
    remove_chains,
    remove_network_policy_rules,
    require_root,
    teardown,
)
from .services import DNS_SERVICE_IP, CoreDns, KubeProxy

PAUSE_IMAGE = "localhost/pause:v1"


# ---- the two processes ----------------------------------------------------------------------
class Containerd(Component):
    name = "containerd"
    ports = ("containerd-stream",)
    stop_timeout = 10.0

    def dir(self, c: Cluster) -> Path:
        return c.run_dir / "containerd"

    def prepare(self, c: Cluster) -> None:
        require_root()
        claim_machine(c.run_dir)
        d = self.dir(c)
        (d / "cni").mkdir(parents=True, exist_ok=True)
        (d / "cni" / "10-coworkgym-testbed.conflist").write_text(json.dumps(cni_config(), indent=2))
        (d / "netns-before.json").write_text(json.dumps(sorted(netns_now())))
        cgroups_up()
        network_up(c.run_dir, [c.ports[r.name] for r in RELAYS if r.name in c.ports])
        (d / "config.toml").write_text(
            f"""version = 2
root = "{d / "root"}"
state = "{d / "state"}"
# Snapshotters that cannot work here only log errors at start.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{containerd_socket(c.run_dir)}"
[ttrpc]
  address = "{d / "containerd.ttrpc.sock"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  # Nothing can be pulled: the pause image is imported from the test-bed's image cache.
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine withholds CAP_SYS_RESOURCE: runc could not set the kubelet's -998.
  restrict_oom_score_adj = true
  stream_server_address = "{LOOPBACK}"
  stream_server_port = "{c.ports["containerd-stream"]}"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d / "cni"}"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = false
"""
        )

    def argv(self, c: Cluster) -> list[str]:
        return ["containerd", f"--config={self.dir(c) / 'config.toml'}", "--log-level=warn"]

    def ready(self, c: Cluster) -> bool:
        if not containerd_socket(c.run_dir).exists():
            return False
        return ctr(c.run_dir, "version", check=False).returncode == 0

    def cleanup(self, c: Cluster) -> None:
        teardown(c.run_dir)


class Kubelet(Component):
    name = "kubelet"
    needs = ("kube-apiserver", "containerd")
    ports = ("kubelet", "kubelet-healthz")
    stop_timeout = 15.0

    def dir(self, c: Cluster) -> Path:
        return c.run_dir / "kubelet"

    def prepare(self, c: Cluster) -> None:
        from .. import images

        images.import_into(containerd_socket(c.run_dir))
        d = self.dir(c)
        d.mkdir(parents=True, exist_ok=True)
        p = c.pki
        (d / "kubeconfig").write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "testbed",
                            "cluster": {
                                "server": c.api_url,
                                "certificate-authority": str(p.ca_cert),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": "node",
                            "user": {
                                "client-certificate": str(p.kubelet_client_cert),
                                "client-key": str(p.kubelet_client_key),
                            },
                        }
                    ],
                    "contexts": [
                        {"name": "node", "context": {"cluster": "testbed", "user": "node"}}
                    ],
                    "current-context": "node",
                }
            )
        )
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": c.ports["kubelet"],
            "readOnlyPort": 0,
            "healthzBindAddress": LOOPBACK,
            "healthzPort": c.ports["kubelet-healthz"],
            "tlsCertFile": str(p.kubelet_serving_cert),
            "tlsPrivateKeyFile": str(p.kubelet_serving_key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(p.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{containerd_socket(c.run_dir)}",
            # No systemd here: cgroupfs, below a cgroup of our own (see the module docstring).
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{CGROUP_ROOT}",
            # This machine has cgroup v1 only; kubelet 1.35+ refuses it unless told.
            "failCgroupV1": False,
            "failSwapOn": False,
            # Images are imported, never pulled: never garbage-collect them.
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "0%",
                "nodefs.inodesFree": "0%",
                "imagefs.available": "0%",
            },
            "clusterDomain": "cluster.local",
            # CoreDNS behind the kube-dns Service (services.py)
            "clusterDNS": [DNS_SERVICE_IP],
            "resolvConf": "/etc/resolv.conf",
            "serializeImagePulls": False,
            "staticPodPath": "",
            "syncFrequency": "10s",
            "fileCheckFrequency": "20s",
            "nodeStatusReportFrequency": "10s",
            "shutdownGracePeriod": "0s",
        }
        (d / "config.json").write_text(json.dumps(config, indent=2))

    def argv(self, c: Cluster) -> list[str]:
        d = self.dir(c)
        return [
            str(which("kubelet")),
            f"--config={d / 'config.json'}",
            f"--kubeconfig={d / 'kubeconfig'}",
            f"--root-dir={d / 'root'}",
            f"--cert-dir={d / 'pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}",
            "--v=1",
        ]

    def cleanup(self, c: Cluster) -> None:
        # The kubelet's own chains: KUBE-FIREWALL (drops packets to 127/8 from elsewhere) and
        # the canaries it watches to notice a flushed table.
        for table in ("filter", "mangle", "nat"):
            remove_chains(table, KUBELET_CHAINS)

    def ready(self, c: Cluster) -> bool:
        if not http_ok(f"http://{LOOPBACK}:{c.ports['kubelet-healthz']}/healthz"):
            return False
        return node_ready(c)


def node_ready(c: Cluster) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(
            f"{c.api_url}/api/v1/nodes/{NODE_NAME}", timeout=2, context=c.tls()
        ) as r:
            node = json.load(r)
    except (urllib.error.URLError, OSError):
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conditions)


class VolumeProvisioner(Component):
    name = "volume-provisioner"
    needs = ("kube-apiserver",)
    stop_timeout = 5.0

    def argv(self, c: Cluster) -> list[str]:
        return [
            sys.executable,
            "-m",
            "coworkgym_testbed.provisioner",
            str(c.kubeconfig),
            str(c.run_dir / "volumes"),
        ]

    def ready(self, c: Cluster) -> bool:
        from ..provisioner import STORAGE_CLASS

        return http_ok(
            f"{c.api_url}/apis/storage.k8s.io/v1/storageclasses/{STORAGE_CLASS}", c.tls()
        )


class NodeRelay(Component):
    """A loopback server as pods see it, at 10.244.0.1:<port> (see relay.py): the one kind
    of port on the node the fence lets pods reach."""

    stop_timeout = 5.0

    def __init__(self, name: str, target: str) -> None:
        self.name = name  # type: ignore[misc]  # a ClassVar elsewhere; one class, two relays
        self.target = target
        self.needs = (target, "containerd")  # type: ignore[misc]
        self.ports = (name,)  # type: ignore[misc]

    def argv(self, c: Cluster) -> list[str]:
        return [
            sys.executable,
            "-m",
            "coworkgym_testbed.relay",
            f"{NODE_IP}:{c.ports[self.name]}",
            f"{LOOPBACK}:{c.ports[self.target]}",
        ]

    def ready(self, c: Cluster) -> bool:
        with (
            contextlib.suppress(OSError),
            socket.create_connection((NODE_IP, c.ports[self.name]), timeout=2),
        ):
            return True
        return False


# The S3 server for the release stage (an object store outside the cluster, reached by
# address); the API server, as the `kubernetes` Service's endpoint (services.py).
RELAYS = (NodeRelay("s3-node-relay", "s3"), NodeRelay("api-node-relay", "kube-apiserver"))


class NetworkPolicyController(Component):
    """kube-router with only its firewall on: it enforces NetworkPolicies for the node's pods
    with iptables (filter table) and ipsets. The bridge plugin enforces none by itself.

    Its router, service proxy and load balancer stay off, so it touches no route, interface
    or CNI file; it listens on nothing but its metrics port on loopback.
    """

    name = "network-policy"
    needs = ("kubelet",)  # it reads its Node object once, at start
    ports = ("network-policy-metrics",)
    stop_timeout = 10.0

    def argv(self, c: Cluster) -> list[str]:
        return [
            str(which("kube-router")),
            f"--kubeconfig={c.kubeconfig}",
            f"--hostname-override={NODE_NAME}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--run-loadbalancer=false",
            "--enable-cni=false",
            "--enable-ipv6=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Its health server binds every interface and cannot be told otherwise: off.
            "--health-port=0",
            "--enable-pprof=false",
            f"--metrics-addr={LOOPBACK}",
            f"--metrics-port={c.ports['network-policy-metrics']}",
            "--iptables-sync-period=1m",
            "--v=1",
        ]

    def env(self) -> dict[str, str]:
        # It picks its node by $NODE_NAME before the hostname and the override flag.
        return {"NODE_NAME": NODE_NAME}

    def ready(self, c: Cluster) -> bool:
        """Ready once it has written the rules at least once."""
        import urllib.request

        url = f"http://{LOOPBACK}:{c.ports['network-policy-metrics']}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                text = r.read().decode()
        except (urllib.error.URLError, OSError):
            return False
        for line in text.splitlines():
            if line.startswith("kube_router_controller_iptables_sync_time_count"):
                return float(line.split()[-1]) >= 1
        return False

    def cleanup(self, c: Cluster) -> None:
        remove_network_policy_rules()


# kube-router leaves its chains and sets behind when it stops; these prefixes are its own.
def s3_node_endpoint(c: Cluster) -> str:
    return f"http://{NODE_IP}:{c.ports['s3-node-relay']}"


def api_node_port(c: Cluster) -> int:
    """Where pods reach the API server: https://10.244.0.1:<this port>."""
    return c.ports["api-node-relay"]


NODE_COMPONENTS: tuple[Component, ...] = (
    Containerd(),
    *RELAYS,
    CoreDns(),
    Kubelet(),
    KubeProxy(),
    NetworkPolicyController(),
    VolumeProvisioner(),
)
