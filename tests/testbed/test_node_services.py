"""Services on the test-bed's node route as on any cluster: kube-proxy (iptables mode) and
CoreDNS, both built from Go modules (testbed/coworkgym_testbed/node/services.py). A client pod
finds a Service by its short name through CoreDNS (the kubelet's clusterDNS, the kube-dns
Service), reaches a server pod through the Service's cluster IP on a port that is not the
pod's, reaches the API server through the `kubernetes` Service with nothing but what the
kubelet gives every pod (KUBERNETES_SERVICE_HOST/_PORT, the service account's CA), and gets
NXDOMAIN for a name outside the cluster at once (nothing leaves the machine). The machine
itself reaches the cluster IP as well."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from coworkgym_testbed.node.services import DNS_SERVICE_IP, KUBERNETES_SERVICE_IP
from coworkgym_testbed.testbed import Testbed
from tests.support.kube import Cluster
from tests.testbed.test_rollout_batch_node import pod, running_ip

pytestmark = [pytest.mark.testbed, pytest.mark.node]

CLIENT = r"""
import json, os, socket, ssl, time, urllib.request
env = os.environ
out = {"resolv": open("/etc/resolv.conf").read(),
       "env": [env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")]}
out["echo_ip"] = socket.gethostbyname("echo")
out["echo_fqdn_ip"] = socket.gethostbyname(f"echo.{os.environ['NS']}.svc.cluster.local")
out["echo_body"] = urllib.request.urlopen("http://echo/hello.txt", timeout=10).read().decode()
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
host, port = out["env"]
with urllib.request.urlopen(f"https://{host}:{port}/version", context=ctx, timeout=10) as r:
    out["api_version"] = json.load(r)["gitVersion"]
with urllib.request.urlopen("https://kubernetes.default.svc/version", context=ctx, timeout=10) as r:
    out["api_by_name"] = json.load(r)["gitVersion"]
t = time.monotonic()
try:
    socket.gethostbyname("example.com")
    out["outside"] = "resolved"
except socket.gaierror as e:
    out["outside"] = e.strerror
out["outside_seconds"] = round(time.monotonic() - t, 2)
print(json.dumps(out))
"""


def test_services_route_on_the_node(testbed_env: Testbed, cluster: Cluster, ns: str) -> None:
    tb = testbed_env
    server = pod(
        "echo-server", ns, {"app": "echo"},
        ["sh", "-c", "mkdir -p /tmp/www && echo hello from the pod > /tmp/www/hello.txt && "
                     "exec python -m http.server 8080 --directory /tmp/www"],
        readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1},
    )  # fmt: skip
    cluster.apply(server)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "echo", "namespace": ns},
        "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    cluster.apply(json.dumps(service))
    server_ip = running_ip(cluster, "echo-server")
    cluster_ip = cluster.v1.read_namespaced_service("echo", ns).spec.cluster_ip

    client = pod(
        "client", ns, {"app": "client"}, ["python", "-c", CLIENT],
        env=[{"name": "NS", "value": ns}],
        pod={"restartPolicy": "Never", "automountServiceAccountToken": True},
    )  # fmt: skip
    cluster.apply(client)

    def finished() -> Any:
        p = cluster.v1.read_namespaced_pod("client", ns)
        return p if p.status.phase in ("Succeeded", "Failed") else None

    done = cluster.wait(finished, timeout=180, message="the client pod finished")
    logs = tb.kubectl("logs", "-n", ns, "client").stdout
    assert done.status.phase == "Succeeded", logs
    seen = json.loads(logs.strip().splitlines()[-1])

    assert f"nameserver {DNS_SERVICE_IP}" in seen["resolv"]
    assert seen["env"] == [KUBERNETES_SERVICE_IP, "443"]
    # the Service's virtual address, not the pod's: kube-proxy translated it, 80 -> 8080
    assert seen["echo_ip"] == seen["echo_fqdn_ip"] == cluster_ip != server_ip
    assert seen["echo_body"].strip() == "hello from the pod"
    version = tb.kubectl("version", "-o", "json").stdout
    assert (
        seen["api_version"]
        == seen["api_by_name"]
        == json.loads(version)["serverVersion"]["gitVersion"]
    )
    assert seen["outside"] != "resolved" and seen["outside_seconds"] < 2, seen

    # the machine itself reaches a cluster IP too (the operator probes a round's model
    # server so): kube-proxy's DNAT in OUTPUT, the service range routed to the bridge
    with urllib.request.urlopen(f"http://{cluster_ip}/hello.txt", timeout=10) as answer:
        assert answer.read().decode().strip() == "hello from the pod"
