"""Services on the node, as on any cluster: kube-proxy (iptables mode) gives every Service its
cluster IP, and CoreDNS answers `<service>.<namespace>.svc.cluster.local` behind the
`kube-dns` Service at 10.0.0.10, the pods' nameserver. Both are built from Go modules
(testbed/build.sh) and run as processes on the machine, as kubeadm's static pods would.

The API server listens on loopback only (it binds one address, and the machine's own address
is off limits), and an EndpointSlice may not hold a loopback address. So the `kubernetes`
Service's endpoint is the node address's API port (the `api-node-relay`, a TCP relay to the
loopback listener, whose TLS names the certificate carries): in-cluster clients use the
standard `KUBERNETES_SERVICE_HOST`/`_PORT` the kubelet gives every pod. CoreDNS runs on the
node address in the same way, and `kube-dns` points there.

What kube-proxy may touch is held in: NodePorts only on the node address (never the machine's
own), no conntrack sysctls, no localhost NodePorts (`route_localnet` stays off), health and
metrics on loopback. The fence (host.py) still drops whatever a DNAT sends off the bridge.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from ..binaries import which
from ..components import LOOPBACK, SERVICE_CIDR, Cluster, Component, http_ok
from ..pki import NODE_IP, NODE_NAME
from .host import POD_SUBNET, remove_chains

CLUSTER_DOMAIN = "cluster.local"
# The first address of the service range is the `kubernetes` Service's (the API server's
# choice); the tenth is kube-dns's by convention, as kubeadm does.
KUBERNETES_SERVICE_IP = "10.0.0.1"
DNS_SERVICE_IP = "10.0.0.10"
DNS_PORT = 53
MANAGED_BY = "coworkgym-testbed"

# kube-proxy's chains (iptables mode), in the filter, nat and mangle tables; `--cleanup` would
# also probe the ipvs and nftables back ends, which this machine does not load.
KUBE_PROXY_CHAINS = (
    "KUBE-SERVICES",
    "KUBE-EXTERNAL-SERVICES",
    "KUBE-NODEPORTS",
    "KUBE-POSTROUTING",
    "KUBE-MARK-",
    "KUBE-FORWARD",
    "KUBE-PROXY-",
    "KUBE-SVC-",
    "KUBE-SVL-",
    "KUBE-SEP-",
    "KUBE-EXT-",
    "KUBE-FW-",
)


def _api(c: Cluster, method: str, path: str, body: dict[str, object] | None = None) -> int:
    """One API call as the admin; returns the HTTP status (4xx/5xx included)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{c.api_url}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10, context=c.tls()) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _apply(c: Cluster, collection: str, name: str, body: dict[str, object]) -> None:
    """Create `body`, or replace it if it exists (the run dir is fresh, the etcd too, but a
    restarted component prepares again)."""
    status = _api(c, "POST", collection, body)
    if status == 409:
        status = _api(c, "PUT", f"{collection}/{name}", body)
    if status >= 300:
        raise RuntimeError(f"writing {collection}/{name} failed: HTTP {status}")


def endpoint_slice(
    service: str, namespace: str, ports: list[tuple[str, str, int]]
) -> dict[str, object]:
    """An EndpointSlice that gives a selector-less Service the node address as its endpoint;
    `ports` are (name, protocol, port on the node)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": service,
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [NODE_IP], "conditions": {"ready": True}, "nodeName": NODE_NAME}
        ],
        "ports": [{"name": n, "protocol": proto, "port": port} for n, proto, port in ports],
    }


def dns_service() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kube-dns",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns", "app.kubernetes.io/managed-by": MANAGED_BY},
        },
        "spec": {
            "clusterIP": DNS_SERVICE_IP,
            "ports": [
                {"name": "dns", "protocol": "UDP", "port": DNS_PORT, "targetPort": DNS_PORT},
                {"name": "dns-tcp", "protocol": "TCP", "port": DNS_PORT, "targetPort": DNS_PORT},
            ],
        },
    }


def register_services(c: Cluster) -> None:
    """The `kubernetes` Service's endpoint (the API server's node address) and the `kube-dns`
    Service with its endpoint (CoreDNS on the node address)."""
    slices = "/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices"
    _apply(
        c,
        slices.format("default"),
        "kubernetes",
        endpoint_slice("kubernetes", "default", [("https", "TCP", c.ports["api-node-relay"])]),
    )
    _apply(c, "/api/v1/namespaces/kube-system/services", "kube-dns", dns_service())
    _apply(
        c,
        slices.format("kube-system"),
        "kube-dns",
        endpoint_slice(
            "kube-dns", "kube-system", [("dns", "UDP", DNS_PORT), ("dns-tcp", "TCP", DNS_PORT)]
        ),
    )


class KubeProxy(Component):
    name = "kube-proxy"
    needs = ("kubelet", "api-node-relay")  # it reads its Node (the node address) at start
    ports = ("kube-proxy-healthz", "kube-proxy-metrics")
    stop_timeout = 10.0

    def dir(self, c: Cluster) -> Path:
        return c.run_dir / "kube-proxy"

    def prepare(self, c: Cluster) -> None:
        register_services(c)
        d = self.dir(c)
        d.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(c.kubeconfig)},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "clusterCIDR": POD_SUBNET,
            "healthzBindAddress": f"{LOOPBACK}:{c.ports['kube-proxy-healthz']}",
            "metricsBindAddress": f"{LOOPBACK}:{c.ports['kube-proxy-metrics']}",
            # NodePorts answer on the node address only, never on the machine's own.
            "nodePortAddresses": [f"{NODE_IP}/32"],
            # 0: leave the machine's conntrack table size and timeouts as they are.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            # No NodePorts on 127.0.0.1: that needs route_localnet, a hole in the loopback.
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "1s"},
        }
        (d / "config.json").write_text(json.dumps(config, indent=2))

    def argv(self, c: Cluster) -> list[str]:
        return [str(which("kube-proxy")), f"--config={self.dir(c) / 'config.json'}", "--v=1"]

    def ready(self, c: Cluster) -> bool:
        """Its healthz answers 200 once it has written the Services' rules."""
        return http_ok(f"http://{LOOPBACK}:{c.ports['kube-proxy-healthz']}/healthz")

    def cleanup(self, c: Cluster) -> None:
        for table in ("filter", "nat", "mangle"):
            remove_chains(table, KUBE_PROXY_CHAINS)


class CoreDns(Component):
    """CoreDNS on 10.244.0.1:53 (UDP and TCP), behind the `kube-dns` Service: the cluster
    domain from the API server (the kubernetes plugin), anything else NXDOMAIN at once (no
    upstream: nothing leaves the machine, and a lookup fails fast instead of timing out)."""

    name = "coredns"
    needs = ("kube-apiserver", "containerd")  # containerd's prepare() makes the bridge
    ports = ("coredns-health", "coredns-ready", "coredns-metrics")
    stop_timeout = 5.0

    def dir(self, c: Cluster) -> Path:
        return c.run_dir / "coredns"

    def prepare(self, c: Cluster) -> None:
        d = self.dir(c)
        d.mkdir(parents=True, exist_ok=True)
        (d / "Corefile").write_text(corefile(c))

    def argv(self, c: Cluster) -> list[str]:
        return [str(which("coredns")), "-conf", str(self.dir(c) / "Corefile")]

    def ready(self, c: Cluster) -> bool:
        """The ready plugin answers 200 once the kubernetes plugin has synced its caches."""
        return http_ok(f"http://{LOOPBACK}:{c.ports['coredns-ready']}/ready")


def corefile(c: Cluster) -> str:
    ports = c.ports
    return f"""{CLUSTER_DOMAIN}:{DNS_PORT} {{
    bind {NODE_IP}
    errors
    health {LOOPBACK}:{ports["coredns-health"]}
    ready {LOOPBACK}:{ports["coredns-ready"]}
    prometheus {LOOPBACK}:{ports["coredns-metrics"]}
    kubernetes {CLUSTER_DOMAIN} {{
        kubeconfig {c.kubeconfig} testbed
        pods insecure
        ttl 5
    }}
    cache 5
    loadbalance
}}
.:{DNS_PORT} {{
    bind {NODE_IP}
    errors
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


__all__ = [
    "DNS_SERVICE_IP",
    "KUBERNETES_SERVICE_IP",
    "SERVICE_CIDR",
    "CoreDns",
    "KubeProxy",
    "corefile",
    "endpoint_slice",
]
