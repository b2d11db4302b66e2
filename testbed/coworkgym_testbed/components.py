"""The test-bed's processes: how each is started and how to tell it is ready.

A component is a name, the components it needs ready before it starts, the loopback ports
it listens on, its command line, and a readiness probe. Adding a node later (containerd,
kubelet, CNI) means adding components here and to `COMPONENTS`; the runner, the state file
and teardown need no change.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .binaries import which
from .pki import FRONT_PROXY_CN, Pki

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"  # cluster IPs: kube-proxy routes them on a node (node/services.py)


@dataclass(frozen=True)
class S3Credentials:
    access_key: str
    secret_key: str
    bucket: str
    region: str = "us-east-1"


@dataclass(frozen=True)
class Cluster:
    """What the components of one run know about each other."""

    run_dir: Path
    pki: Pki
    ports: dict[str, int]
    s3: S3Credentials

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "kubeconfig"

    @property
    def api_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['s3']}"

    def data(self, name: str) -> Path:
        path = self.run_dir / "data" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def tls(self) -> ssl.SSLContext:
        """Verifies servers against the run's CA and presents the admin client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx


def http_ok(url: str, tls: ssl.SSLContext | None = None) -> bool:
    """True when GET `url` answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=tls) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class Component(ABC):
    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    ports: ClassVar[tuple[str, ...]] = ()  # port names allocated for this component
    stop_timeout: ClassVar[float] = 20.0  # seconds between SIGTERM and SIGKILL

    def prepare(self, c: Cluster) -> None:  # noqa: B027 - optional hook, not abstract
        """Write config files before start (default: nothing)."""

    def cleanup(self, c: Cluster) -> None:  # noqa: B027 - optional hook, not abstract
        """Remove what the process left outside the run dir, after it stopped (default: nothing)."""

    def env(self) -> dict[str, str]:
        """Variables added to the process's environment (default: none)."""
        return {}

    @abstractmethod
    def argv(self, c: Cluster) -> list[str]: ...

    @abstractmethod
    def ready(self, c: Cluster) -> bool: ...


class Etcd(Component):
    name = "etcd"
    ports = ("etcd", "etcd-peer")

    def argv(self, c: Cluster) -> list[str]:
        client = f"http://{LOOPBACK}:{c.ports['etcd']}"
        peer = f"http://{LOOPBACK}:{c.ports['etcd-peer']}"
        return [
            str(which("etcd")),
            "--name=testbed",
            f"--data-dir={c.data('etcd')}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=testbed={peer}",
            # Throwaway data: skipping fsync makes every API write several times faster.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def ready(self, c: Cluster) -> bool:
        return http_ok(f"http://{LOOPBACK}:{c.ports['etcd']}/health")


class KubeApiServer(Component):
    name = "kube-apiserver"
    needs = ("etcd",)
    ports = ("kube-apiserver",)

    def argv(self, c: Cluster) -> list[str]:
        p = c.pki
        return [
            str(which("kube-apiserver")),
            f"--etcd-servers=http://{LOOPBACK}:{c.ports['etcd']}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={c.ports['kube-apiserver']}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            f"--client-ca-file={p.ca_cert}",
            # Node: a kubelet may touch only its own node's objects (with NodeRestriction).
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            # Logs and exec go from the API server to the kubelet, which it verifies.
            f"--kubelet-client-certificate={p.admin_cert}",
            f"--kubelet-client-key={p.admin_key}",
            f"--kubelet-certificate-authority={p.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP",
            # ServiceAccount admission stays on (the default): the controller-manager creates
            # the `default` ServiceAccount each namespace needs for pods.
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p.sa_pub}",
            f"--service-account-signing-key-file={p.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # The `kubernetes` Service would point at the advertise address, and Endpoints
            # may not hold a loopback IP: the reconciler would log an error every 10 s.
            # Nothing in-cluster can reach the API server that way anyway (no kube-proxy).
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            # The aggregation layer, configured as kubeadm does; without it, every component
            # reading extension-apiserver-authentication logs "missing content for CA bundle".
            f"--requestheader-client-ca-file={p.ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CN}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p.front_proxy_cert}",
            f"--proxy-client-key-file={p.front_proxy_key}",
            f"--cert-dir={c.data('apiserver-certs')}",
        ]

    def ready(self, c: Cluster) -> bool:
        return http_ok(f"{c.api_url}/readyz", c.tls())


class KubeControllerManager(Component):
    name = "kube-controller-manager"
    needs = ("kube-apiserver",)
    ports = ("kube-controller-manager",)

    def argv(self, c: Cluster) -> list[str]:
        p, kc = c.pki, c.kubeconfig
        return [
            str(which("kube-controller-manager")),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={c.ports['kube-controller-manager']}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            "--leader-elect=false",
            f"--service-account-private-key-file={p.sa_key}",
            f"--root-ca-file={p.ca_cert}",
            # Lets the CSR signer issue certificates (e.g. for a kubelet added later).
            f"--cluster-signing-cert-file={p.ca_cert}",
            f"--cluster-signing-key-file={p.ca_key}",
        ]

    def ready(self, c: Cluster) -> bool:
        # healthz alone is not enough for tests that create pods right away: ServiceAccount
        # admission rejects pods until the controller has made the `default` account.
        port = c.ports["kube-controller-manager"]
        return http_ok(f"https://{LOOPBACK}:{port}/healthz", c.tls()) and http_ok(
            f"{c.api_url}/api/v1/namespaces/default/serviceaccounts/default", c.tls()
        )


class KubeScheduler(Component):
    name = "kube-scheduler"
    needs = ("kube-apiserver",)
    ports = ("kube-scheduler",)

    def argv(self, c: Cluster) -> list[str]:
        p, kc = c.pki, c.kubeconfig
        return [
            str(which("kube-scheduler")),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={c.ports['kube-scheduler']}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            "--leader-elect=false",
        ]

    def ready(self, c: Cluster) -> bool:
        return http_ok(f"https://{LOOPBACK}:{c.ports['kube-scheduler']}/readyz", c.tls())


class SeaweedS3(Component):
    """SeaweedFS in one process (master + volume + filer + S3 gateway), all on loopback.

    Every port is given explicitly: SeaweedFS otherwise derives gRPC ports as HTTP+10000
    and opens extra listeners (Iceberg, Lance) on fixed ports.
    """

    name = "s3"
    ports = (
        "s3",
        "s3-grpc",
        "seaweed-master",
        "seaweed-master-grpc",
        "seaweed-volume",
        "seaweed-volume-grpc",
        "seaweed-filer",
        "seaweed-filer-grpc",
    )

    # Its graceful shutdown stops the volume server first, then spends 15 s trying to flush
    # the filer's log into it. The data is throwaway (wiped by the next `up`): don't wait.
    stop_timeout = 2.0

    def config_file(self, c: Cluster) -> Path:
        return c.run_dir / "s3-identities.json"

    def cleanup(self, c: Cluster) -> None:
        # SeaweedFS always adds unix sockets at /tmp/seaweedfs-<role>-grpc-<port>.sock; remove
        # the ones named after this run's ports.
        for role in ("master", "volume", "filer", "s3"):
            name = f"seaweed-{role}-grpc" if role != "s3" else "s3-grpc"
            sock = Path(f"/tmp/seaweedfs-{role}-grpc-{c.ports[name]}.sock")
            if sock.is_socket():
                sock.unlink()

    def prepare(self, c: Cluster) -> None:
        admin = {
            "name": "testbed",
            "credentials": [{"accessKey": c.s3.access_key, "secretKey": c.s3.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        path = self.config_file(c)
        path.write_text(json.dumps({"identities": [admin]}, indent=2))
        path.chmod(0o600)

    def argv(self, c: Cluster) -> list[str]:
        p = c.ports
        argv = [
            str(which("weed")),
            "-logtostderr=true",
            "server",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            f"-dir={c.data('s3')}",
            f"-master.port={p['seaweed-master']}",
            f"-master.port.grpc={p['seaweed-master-grpc']}",
            # The default reports usage to a public host; nothing may leave this machine.
            "-master.telemetry=false",
            # Small sparse volumes, many of them: each bucket is its own collection.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=64",
            f"-volume.port={p['seaweed-volume']}",
            "-volume.preStopSeconds=0",  # default 10: a drain period, pointless for one node
            f"-volume.port.grpc={p['seaweed-volume-grpc']}",
            "-filer",
            f"-filer.port={p['seaweed-filer']}",
            f"-filer.port.grpc={p['seaweed-filer-grpc']}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3-grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.config_file(c)}",
        ]
        # Unix sockets default to /tmp; keep them in the run dir when the path fits (108 bytes).
        if len(str(c.run_dir)) < 80:
            argv += [
                f"-filer.localSocket={c.run_dir / 'filer.sock'}",
                f"-s3.localSocket={c.run_dir / 's3.sock'}",
            ]
        return argv

    def ready(self, c: Cluster) -> bool:
        # Ready means: the gateway accepts our credentials and the bucket exists.
        from .s3 import ensure_bucket

        return ensure_bucket(c.s3_endpoint, c.s3)


# Start order. Each component waits only for what it `needs`; the S3 server starts together
# with etcd and is waited for last.
COMPONENTS: tuple[Component, ...] = (
    Etcd(),
    SeaweedS3(),
    KubeApiServer(),
    KubeControllerManager(),
    KubeScheduler(),
)
