"""The chart and the operator together: two replicas run exactly as the chart's Deployment
says (its command, arguments and environment) with the chart's ServiceAccount token, so
the RBAC is what the operator really gets. One replica works, the other stands by and
takes over; an environment's children are created and removed under that RBAC."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkgym_testbed.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

CHART = Path(__file__).resolve().parents[2] / "charts" / "cowork-gym"
# In a namespaced install kopf may not list namespaces or CRDs; it retries for about a
# minute before it settles for the release namespace.
STARTUP_S = 150.0
ENVIRONMENT = {
    "apiVersion": "coworkgym.dev/v1alpha1",
    "kind": "CoworkEnvironment",
    "metadata": {"name": "ha-check"},
    "spec": {
        "task": {
            "labels": {
                "scenario": "data_analysis/reporting/periodic_report",
                "capabilities": ["data_analysis"],
            },
            "family": "weather_report",
        }
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1.0)


class Replica:
    """One operator pod, as a local process: the Deployment's container, its pod name."""

    def __init__(self, container: dict[str, Any], pod: str, kubeconfig: Path, logs: Path):
        self.pod, self.log = pod, logs / f"{pod}.log"
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        env |= {"POD_ID": pod, "COWORKGYM_METRICS_PORT": str(free_port())}
        env |= {"KUBECONFIG": str(kubeconfig), "HOME": str(logs)}
        env["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
        # Kubernetes reads `$$(` as a literal `$(`; ports are free ones, not 8080/8081.
        command = [c.replace("$$(", "$(") for c in container["command"]]
        args = [a.replace("0.0.0.0:8081", f"127.0.0.1:{free_port()}") for a in container["args"]]
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            [*command, *args],
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._out.close()


@pytest.fixture
def installed(testbed: Testbed, testbed_namespace: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The chart installed with two replicas; its operator container, as rendered."""
    ns = testbed_namespace
    testbed.helm("install", "ha", str(CHART), "-n", ns, "--set-json", "operator.replicas=2")
    manifest = yaml.safe_load_all(testbed.helm("get", "manifest", "ha", "-n", ns).stdout)
    (deployment,) = [d for d in manifest if d and d["kind"] == "Deployment"]
    yield ns, deployment["spec"]["template"]["spec"]["containers"][0]
    testbed.kubectl("delete", "coworkenvironment", "--all", "-n", ns, "--wait=false", check=False)
    testbed.helm("uninstall", "ha", "-n", ns, "--no-hooks", check=False)  # no node: no hook pod


def service_account_kubeconfig(testbed: Testbed, ns: str, account: str, path: Path) -> Path:
    token = testbed.kubectl("create", "token", account, "-n", ns, "--duration=15m").stdout
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "testbed",
                        "cluster": {
                            "server": testbed.api_url,
                            "certificate-authority": str(testbed.ca_file),
                        },
                    }
                ],
                "users": [{"name": account, "user": {"token": token.strip()}}],
                "contexts": [{"name": "sa", "context": {"cluster": "testbed", "user": account}}],
                "current-context": "sa",
            }
        )
    )
    return path


@pytest.mark.timeout(420)
def test_one_replica_works_the_other_takes_over(
    testbed: Testbed, installed: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    ns, container = installed
    kubeconfig = service_account_kubeconfig(testbed, ns, "ha-cowork-gym", tmp_path / "kubeconfig")
    replicas = [
        Replica(container, f"ha-cowork-gym-{suffix}", kubeconfig, tmp_path)
        for suffix in ("5d8f9-aaaaa", "5d8f9-bbbbb")
    ]
    try:

        def peers() -> dict[str, Any]:
            status: dict[str, Any] = (
                json.loads(
                    testbed.kubectl(
                        "get", "kopfpeering", "ha-cowork-gym", "-n", ns, "-o", "json"
                    ).stdout
                ).get("status")
                or {}
            )
            for replica in replicas:
                assert replica.proc.poll() is None, replica.output()[-3000:]
            return status if {r.pod for r in replicas} <= set(status) else {}

        status = wait_for("both replicas in the peering object", peers, STARTUP_S)
        priorities = {r.pod: status[r.pod]["priority"] for r in replicas}
        assert len(set(priorities.values())) == 2, priorities  # a tie would pause both
        active, standby = sorted(replicas, key=lambda r: -priorities[r.pod])

        testbed.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(ENVIRONMENT))

        def phase() -> str:
            got = json.loads(
                testbed.kubectl("get", "cwe", "ha-check", "-n", ns, "-o", "json").stdout
            )
            return str(got.get("status", {}).get("phase", ""))

        assert wait_for("a phase in the status", phase, 60) == "Building"
        children = testbed.kubectl(
            "get", "jobs,pvc,networkpolicy", "-n", ns,
            "-l", "coworkgym.dev/environment=ha-check", "-o", "name",
        ).stdout.split()  # fmt: skip
        assert len(children) == 7, children  # the Builder's Job, 3 volumes, 3 policies
        assert "ha-check" in active.output()
        assert "ha-check" not in standby.output()

        # The active replica stops (a rollout, a drain): it leaves the peering object,
        # and the standby resumes and carries on with the environment.
        active.stop()
        wait_for("the standby to resume", lambda: "Resuming operations" in standby.output(), 90)
        wait_for("the standby to reconcile", lambda: "ha-check" in standby.output(), 60)

        # Deleting the environment removes its children, under the chart's RBAC (volumes
        # go once the pvc-protection controller sees no pod using them).
        deleted = testbed.kubectl(
            "delete", "cwe", "ha-check", "-n", ns, "--wait=true", "--timeout=60s", check=False
        )
        left = testbed.kubectl("get", "cwe", "ha-check", "-n", ns, "-o", "yaml", check=False)
        assert deleted.returncode == 0, deleted.stderr + left.stdout + standby.output()[-3000:]

        def children_gone() -> bool:
            return not testbed.kubectl(
                "get", "jobs,pods,pvc,networkpolicy", "-n", ns,
                "-l", "coworkgym.dev/environment=ha-check", "-o", "name",
            ).stdout.strip()  # fmt: skip

        wait_for("the children to go", children_gone, 60)
        forbidden = [
            line
            for r in replicas
            for line in r.output().splitlines()
            if "Forbidden" in line
            and "namespaces" not in line
            and "customresourcedefinitions" not in line
        ]
        assert forbidden == [], forbidden  # only kopf's optional cluster scans are refused
    finally:
        for replica in replicas:
            replica.stop()
