"""Bring the test-bed up and down, and describe a running one.

All of a run lives in one directory (default `./.testbed`, or $COWORKGYM_TESTBED_DIR):
the PKI, the kubeconfig, data, one log per component under logs/, and state.json, which
records PIDs, ports and credentials so that another process (the CLI, a pytest session)
can find, use and stop the same test-bed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import pki as pki_mod
from . import proc
from .binaries import which
from .components import COMPONENTS, LOOPBACK, Cluster, Component, S3Credentials
from .kuberay import kuberay_components
from .node import NODE_COMPONENTS, NODE_IP, api_node_port, s3_node_endpoint, unmount_below

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STATE_FILE = "state.json"
# Only a directory carrying this marker (or an empty one) is ever wiped by `up`.
MARKER = ".coworkgym-testbed"
BUCKET = "cowork-gym"


class StartupError(RuntimeError):
    pass


class ToolError(subprocess.CalledProcessError):
    """A test-bed program failed; unlike its base class, the message shows its stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstderr:\n{proc.last_lines(self.stderr or '', 30)}"


def components_for(node: bool, kuberay: bool = False) -> tuple[Component, ...]:
    """What a run starts, in order: the control plane and S3, then the node and KubeRay's
    operator if asked for."""
    return (
        COMPONENTS
        + (NODE_COMPONENTS if node else ())
        + (kuberay_components() if kuberay else ())
    )


def kuberay_requested() -> bool:
    """COWORKGYM_TESTBED_KUBERAY=1: a test-bed started by a pytest session gets KubeRay."""
    return os.environ.get("COWORKGYM_TESTBED_KUBERAY", "").strip().lower() in ("1", "true", "yes")


def default_run_dir() -> Path:
    return Path(os.environ.get("COWORKGYM_TESTBED_DIR") or Path.cwd() / ".testbed").absolute()


@dataclass
class Testbed:
    """A test-bed run, as recorded in its state file."""

    __test__ = False  # a name starting with "Test" is not a pytest test class

    run_dir: Path
    ports: dict[str, int]
    s3_credentials: S3Credentials
    processes: dict[str, proc.ProcessRecord] = field(default_factory=dict)
    # Seconds from the start of `up` until each component was ready.
    ready_after: dict[str, float] = field(default_factory=dict)
    node: bool = False  # with a node (containerd + kubelet): pods really run
    kuberay: bool = False  # with KubeRay's operator and CRDs (kuberay.py)

    @property
    def components(self) -> tuple[Component, ...]:
        return components_for(self.node, self.kuberay)

    # ---- what clients need -------------------------------------------------------------
    @property
    def cluster(self) -> Cluster:
        return Cluster(
            self.run_dir, pki_mod.Pki(self.run_dir / "pki"), self.ports, self.s3_credentials
        )

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def api_url(self) -> str:
        return self.cluster.api_url

    @property
    def ca_file(self) -> Path:
        return self.cluster.pki.ca_cert

    @property
    def s3_endpoint(self) -> str:
        return self.cluster.s3_endpoint

    @property
    def s3_bucket(self) -> str:
        return self.s3_credentials.bucket

    @property
    def s3_access_key(self) -> str:
        return self.s3_credentials.access_key

    @property
    def s3_secret_key(self) -> str:
        return self.s3_credentials.secret_key

    @property
    def s3_region(self) -> str:
        return self.s3_credentials.region

    def env(self) -> dict[str, str]:
        """Environment variables that point clients (kubectl, kopf, boto3) at this test-bed."""
        return {
            "COWORKGYM_TESTBED_DIR": str(self.run_dir),
            "KUBECONFIG": str(self.kubeconfig),
            "COWORKGYM_KUBE_API": self.api_url,
            "COWORKGYM_S3_ENDPOINT": self.s3_endpoint,
            "COWORKGYM_S3_BUCKET": self.s3_bucket,
            "AWS_ACCESS_KEY_ID": self.s3_access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3_secret_key,
            "AWS_DEFAULT_REGION": self.s3_region,
            "AWS_ENDPOINT_URL_S3": self.s3_endpoint,
            # Never let an AWS SDK probe the instance-metadata address for credentials.
            "AWS_EC2_METADATA_DISABLED": "true",
        } | (self.node_env() if self.node else {})

    def node_env(self) -> dict[str, str]:
        """Where pods on the node reach the S3 server and the API server (the node's relays):
        what a Helm install of the operator on the node needs (testbed/values.yaml)."""
        return {
            "COWORKGYM_NODE_IP": NODE_IP,
            "COWORKGYM_S3_NODE_ENDPOINT": self.s3_node_endpoint,
            "COWORKGYM_S3_NODE_PORT": str(self.ports["s3-node-relay"]),
            "COWORKGYM_API_NODE_PORT": str(self.api_node_port),
        }

    @property
    def s3_node_endpoint(self) -> str:
        """The S3 server as pods on the node reach it."""
        return s3_node_endpoint(self.cluster)

    @property
    def api_node_port(self) -> int:
        """The API server as pods on the node reach it: https://10.244.0.1:<port>."""
        return api_node_port(self.cluster)

    def kubernetes_client(self) -> Any:
        """A `kubernetes.client.ApiClient` for the admin user (needs the `operator` extra)."""
        from kubernetes import config

        # The kubernetes package ships partial type hints; this function has none.
        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    def s3_client(self) -> S3Client:
        from .s3 import client

        return client(self.s3_endpoint, self.s3_credentials)

    def run(
        self,
        tool: str,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run a test-bed program (kubectl, helm, kubeconform, promtool, ...) against this
        test-bed; output is captured as text. With check=True a non-zero exit raises
        ToolError (a CalledProcessError whose message includes stderr)."""
        env = os.environ | self.env()
        helm_home = self.run_dir / "helm"  # keep helm's config/cache out of $HOME
        env |= {f"HELM_{k}_HOME": str(helm_home / k.lower()) for k in ("CONFIG", "CACHE", "DATA")}
        cp = subprocess.run(
            [str(which(tool)), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and cp.returncode != 0:
            raise ToolError(cp.returncode, cp.args, cp.stdout, cp.stderr)
        return cp

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", f"--kubeconfig={self.kubeconfig}", *args, **kw)

    def helm(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", f"--kubeconfig={self.kubeconfig}", *args, **kw)

    def kubeconform(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubeconform", *args, **kw)

    def promtool(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("promtool", *args, **kw)

    def kubeconform_schema_location(self, refresh: bool = False) -> str:
        """A `-schema-location` for kubeconform, generated offline from this API server's
        OpenAPI (so CRDs installed so far are included; pass refresh=True after adding more)."""
        from .schemas import SCHEMA_TEMPLATE, generate

        out = self.run_dir / "kubeconform-schemas"
        if refresh or not out.is_dir():
            generate(self.api_url, self.cluster.tls(), out)
        return str(out / SCHEMA_TEMPLATE)

    # ---- liveness and logs ---------------------------------------------------------------
    def running(self) -> dict[str, bool]:
        return {name: proc.is_running(rec) for name, rec in self.processes.items()}

    def healthy(self) -> bool:
        """Every component recorded, alive, and ready. A process this code does not know (a
        newer checkout's component) must be alive: it is no reason to restart a shared
        test-bed."""
        by_name = {c.name: c for c in self.components}
        return set(by_name) <= set(self.processes) and all(
            proc.is_running(rec) and (name not in by_name or by_name[name].ready(self.cluster))
            for name, rec in self.processes.items()
        )

    def log_path(self, component: str) -> Path:
        return self.run_dir / "logs" / f"{component}.log"

    def logs_tail(self, lines: int = 25) -> str:
        parts = []
        for name in self.processes:
            parts.append(f"----- {name} ({self.log_path(name)}) -----")
            parts.append(proc.tail(self.log_path(name), lines))
        return "\n".join(parts)

    # ---- state file ------------------------------------------------------------------------
    def save(self) -> None:
        data = {
            "run_dir": str(self.run_dir),
            "ports": self.ports,
            "s3": vars(self.s3_credentials),
            "processes": {n: r.to_json() for n, r in self.processes.items()},
            "ready_after": self.ready_after,
            "node": self.node,
            "kuberay": self.kuberay,
            # Derived, for shell users and other tools reading the file.
            "kubeconfig": str(self.kubeconfig),
            "api_url": self.api_url,
            "s3_endpoint": self.s3_endpoint,
        }
        tmp = self.run_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.chmod(0o600)  # holds the S3 secret
        tmp.replace(self.run_dir / STATE_FILE)

    @classmethod
    def load(cls, run_dir: Path | None = None) -> Testbed | None:
        run_dir = run_dir or default_run_dir()
        try:
            data = json.loads((run_dir / STATE_FILE).read_text())
        except FileNotFoundError:
            return None
        return cls(
            run_dir=Path(data["run_dir"]),
            ports=data["ports"],
            s3_credentials=S3Credentials(**data["s3"]),
            processes={n: proc.ProcessRecord.from_json(r) for n, r in data["processes"].items()},
            ready_after=data.get("ready_after", {}),
            node=data.get("node", False),
            kuberay=data.get("kuberay", False),
        )

    def stop(self) -> None:
        """Stop the recorded processes, last started first; keep the logs."""
        by_name = {comp.name: comp for comp in components_for(node=True, kuberay=True)}
        for name in reversed(list(self.processes)):
            comp = by_name.get(name)
            proc.stop(self.processes[name], timeout=comp.stop_timeout if comp else 20.0)
            if comp is not None:
                comp.cleanup(self.cluster)
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)


# ---- bringing it up ----------------------------------------------------------------------
def _free_ports(names: list[str]) -> dict[str, int]:
    """Ports the kernel calls free right now; all sockets stay open until every port is
    picked so that no two names get the same one."""
    with contextlib.ExitStack() as stack:
        ports = {}
        for name in names:
            s = stack.enter_context(socket.socket())
            s.bind((LOOPBACK, 0))
            ports[name] = s.getsockname()[1]
        return ports


def _fresh_run_dir(run_dir: Path) -> None:
    if run_dir.exists() and any(run_dir.iterdir()) and not (run_dir / MARKER).exists():
        raise StartupError(
            f"{run_dir} is not empty and is not a test-bed directory; refusing to wipe it"
        )
    if run_dir.exists() and os.geteuid() == 0:
        unmount_below(run_dir)  # never let rmtree walk into something a node left mounted
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    (run_dir / MARKER).touch()


def _write_kubeconfig(c: Cluster) -> None:
    # JSON is YAML: kubectl, kopf and the Python client all read it.
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "testbed",
                "cluster": {"server": c.api_url, "certificate-authority": str(c.pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(c.pki.admin_cert),
                    "client-key": str(c.pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "admin"}}],
        "current-context": "testbed",
    }
    c.kubeconfig.write_text(json.dumps(kubeconfig, indent=2))


@contextlib.contextmanager
def _cleanup_on_error(tb: Testbed) -> Iterator[None]:
    try:
        yield
    except BaseException:
        tb.stop()
        raise


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    """Serialize `up`/`down` on one run dir across processes: without it, a second `up`
    would find a test-bed still starting, call it unhealthy, and stop it."""
    # Not inside the run dir (`up` wipes it), nor beside it (that may be a source tree).
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:16]
    with (Path(tempfile.gettempdir()) / f"coworkgym-testbed-{digest}.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def running(run_dir: Path | None = None) -> Testbed | None:
    """The healthy test-bed recorded in `run_dir`, if there is one."""
    tb = Testbed.load(run_dir)
    return tb if tb is not None and tb.healthy() else None


def up(
    run_dir: Path | None = None,
    timeout: float = 180.0,
    say: Callable[[str], None] = lambda _msg: None,
    node: bool = False,
    kuberay: bool = False,
) -> tuple[Testbed, bool]:
    """Start the test-bed in `run_dir`, or reuse a healthy one already running there
    (one without a node is restarted when a node is asked for; KubeRay's operator is added
    to a running one without a restart).

    Returns (testbed, started): started is False when an existing one was reused.
    """
    run_dir = (run_dir or default_run_dir()).absolute()
    with _locked(run_dir):
        existing = Testbed.load(run_dir)
        if existing is not None:
            if existing.healthy() and (existing.node or not node):
                say(f"reusing the test-bed running in {run_dir}")
                if kuberay and not existing.kuberay:
                    _add_kuberay(existing, timeout, say)
                return existing, False
            why = "it has no node" if existing.healthy() else "it is unhealthy"
            say(f"stopping the test-bed in {run_dir}: {why}")
            existing.stop()
        if node:
            # The role image carries the project's code: rebuild it when the code changed (a
            # warm run with no change takes a second), so pods never run stale code.
            from . import images

            images.build(say=say)
        return _start(run_dir, timeout, say, node, kuberay), True


def add_kuberay(
    tb: Testbed, timeout: float = 120.0, say: Callable[[str], None] = lambda _msg: None
) -> Testbed:
    """Give a running test-bed KubeRay's CRDs and operator, if it has them not yet (the
    other processes keep running). Returns the test-bed as recorded afterwards."""
    with _locked(tb.run_dir):
        current = Testbed.load(tb.run_dir) or tb
        if not current.kuberay:
            _add_kuberay(current, timeout, say)
        return current


def restart(
    tb: Testbed, component: str, *, kill: bool = False, down_s: float = 0.0, timeout: float = 120.0
) -> float:
    """Stop one process of a running test-bed and start it again with the same command line,
    ports and data (the reliability drills restart the API server, etcd and the S3 server
    under a working operator). ``kill``: SIGKILL instead of SIGTERM first; ``down_s``: how
    long it stays down. Returns the seconds from the stop until it was ready again.

    Never on a shared test-bed others are using: their clients see the outage too."""
    by_name = {comp.name: comp for comp in tb.components}
    comp, rec = by_name[component], tb.processes[component]
    with _locked(tb.run_dir):
        stopped = time.monotonic()
        if kill and proc.is_running(rec):
            os.kill(rec.pid, signal.SIGKILL)
        proc.stop(rec, timeout=comp.stop_timeout)
        comp.cleanup(tb.cluster)
        time.sleep(down_s)
        env = os.environ | comp.env() if comp.env() else None
        tb.processes[component] = proc.spawn(
            comp.name, comp.argv(tb.cluster), Path(rec.log), env=env
        )
        tb.save()
        deadline = time.monotonic() + timeout
        while not comp.ready(tb.cluster):
            if not proc.is_running(tb.processes[component]):
                raise StartupError(f"{component} exited on restart:\n{proc.tail(rec.log)}")
            if time.monotonic() > deadline:
                raise StartupError(f"{component} not ready {timeout:.0f}s after its restart")
            time.sleep(0.1)
        return time.monotonic() - stopped


def _add_kuberay(tb: Testbed, timeout: float, say: Callable[[str], None]) -> None:
    if tb.node and "coredns" not in tb.processes:
        raise StartupError(
            f"the node in {tb.run_dir} was started by an older checkout, without CoreDNS "
            "(Ray workers find their head by name): restart it (`down`, then `up --node "
            "--kuberay`)"
        )
    added = kuberay_components()
    names = [p for comp in added for p in comp.ports if p not in tb.ports]
    tb.ports |= _free_ports(names)
    tb.kuberay = True
    try:
        _launch(tb, added, time.monotonic(), timeout, say)
    except BaseException:
        # Only what was added goes: the rest of a shared test-bed keeps running.
        for comp in reversed(added):
            rec = tb.processes.pop(comp.name, None)
            if rec is not None:
                proc.stop(rec, timeout=comp.stop_timeout)
            tb.ready_after.pop(comp.name, None)
        tb.kuberay = False
        tb.save()
        raise


def _start(
    run_dir: Path, timeout: float, say: Callable[[str], None], node: bool, kuberay: bool
) -> Testbed:
    t0 = time.monotonic()
    _fresh_run_dir(run_dir)
    pki_mod.generate(run_dir / "pki")
    components = components_for(node, kuberay)
    tb = Testbed(
        run_dir=run_dir,
        node=node,
        kuberay=kuberay,
        ports=_free_ports([p for comp in components for p in comp.ports]),
        s3_credentials=S3Credentials(
            access_key="tb" + secrets.token_hex(9),
            secret_key=secrets.token_urlsafe(30),
            bucket=BUCKET,
        ),
    )
    _write_kubeconfig(tb.cluster)
    tb.save()
    with _cleanup_on_error(tb):
        _launch(tb, components, t0, timeout, say)
    return tb


def _launch(
    tb: Testbed,
    components: tuple[Component, ...],
    t0: float,
    timeout: float,
    say: Callable[[str], None],
) -> None:
    """Start `components` in order, each once what it `needs` is ready (a component already
    recorded ready counts at once); then wait until all are ready."""
    c = tb.cluster
    deadline = t0 + timeout
    by_name = {comp.name: comp for comp in tb.components}

    def wait_ready(comp: Component) -> None:
        if comp.name in tb.ready_after:
            return
        rec = tb.processes[comp.name]
        while not comp.ready(c):
            if not proc.is_running(rec):
                raise StartupError(f"{comp.name} exited during startup:\n{proc.tail(rec.log)}")
            if time.monotonic() > deadline:
                raise StartupError(
                    f"{comp.name} not ready after {timeout:.0f}s:\n{proc.tail(rec.log)}"
                )
            time.sleep(0.2)
        tb.ready_after[comp.name] = round(time.monotonic() - t0, 2)
        tb.save()
        say(f"{comp.name} ready after {tb.ready_after[comp.name]}s")

    for comp in components:
        for dep in comp.needs:
            wait_ready(by_name[dep])
        comp.prepare(c)
        env = os.environ | comp.env() if comp.env() else None
        tb.processes[comp.name] = proc.spawn(
            comp.name, comp.argv(c), tb.log_path(comp.name), env=env
        )
        tb.save()  # record the PID at once, so `down` can stop a half-started test-bed
    for comp in components:
        wait_ready(comp)


def down(run_dir: Path | None = None) -> bool:
    """Stop the test-bed recorded in `run_dir`. False if none was recorded."""
    run_dir = (run_dir or default_run_dir()).absolute()
    with _locked(run_dir):
        tb = Testbed.load(run_dir)
        if tb is None:
            return False
        tb.stop()
        return True
