"""The test-bed node's cluster DNS (coworkgym_testbed.dns) over real UDP on loopback, with
the API server's answers given: names of Services resolve to their endpoints, a pod's
hostname under its Service to that pod, unknown names and names outside the cluster domain
to NXDOMAIN, other record types to an empty answer, garbage to FORMERR."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from coworkgym_testbed import dns

SERVICES = {
    ("ray", "tiny-head-svc"): [("10.244.0.21", None)],
    ("ray", "workers"): [("10.244.0.23", "w1"), ("10.244.0.22", "w0")],
    ("ray", "empty"): [],
}


class GivenEndpoints(dns.Endpoints):
    def __init__(self) -> None:
        self.calls = 0

    def of(self, namespace: str, service: str) -> list[tuple[str, str | None]] | None:
        self.calls += 1
        return SERVICES.get((namespace, service))


@pytest.fixture
def server() -> Iterator[int]:
    srv = dns.make_server("127.0.0.1", GivenEndpoints(), port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_service_names_resolve_to_their_endpoints(server: int) -> None:
    q = dns.query
    assert q("127.0.0.1", "tiny-head-svc.ray.svc.cluster.local", port=server) == (
        dns.NOERROR,
        ["10.244.0.21"],
    )
    assert q("127.0.0.1", "Workers.RAY.svc.cluster.local.", port=server) == (
        dns.NOERROR,
        ["10.244.0.22", "10.244.0.23"],
    )
    assert q("127.0.0.1", "w1.workers.ray.svc.cluster.local", port=server) == (
        dns.NOERROR,
        ["10.244.0.23"],
    )
    assert q("127.0.0.1", "empty.ray.svc.cluster.local", port=server) == (dns.NOERROR, [])


@pytest.mark.parametrize(
    "name",
    [
        "nope.ray.svc.cluster.local",
        "w9.workers.ray.svc.cluster.local",
        "ray.svc.cluster.local",
        "example.com",
        "tiny-head-svc.ray.svc.cluster.local.example.com",
    ],
)
def test_other_names_are_nxdomain_at_once(server: int, name: str) -> None:
    assert dns.query("127.0.0.1", name, timeout=1, port=server) == (dns.NXDOMAIN, [])


def test_other_types_get_an_empty_answer_and_garbage_formerr(server: int) -> None:
    labels = ["workers", "ray", "svc", "cluster", "local"]
    qname = b"".join(bytes([len(p)]) + p.encode() for p in labels)
    aaaa = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + qname + b"\0" + struct.pack("!HH", 28, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(aaaa, ("127.0.0.1", server))
        reply = s.recv(512)
        qid, flags, _qd, ancount = struct.unpack("!HHHH", reply[:8])
        assert (qid, flags & 0xF, ancount) == (7, dns.NOERROR, 0)
        s.sendto(b"\x00\x09garbage", ("127.0.0.1", server))
        reply = s.recv(512)
        assert struct.unpack("!H", reply[:2])[0] == 9 and reply[3] & 0xF == dns.FORMERR
