"""The node's cluster DNS: `<service>.<namespace>.svc.cluster.local` answers with the
addresses of the Service's endpoints, read from the API server's EndpointSlices.

A cluster normally runs CoreDNS (an image, which the test-bed cannot pull) behind a Service
(which needs kube-proxy, which the test-bed has not). Pods on the node get this server as
their nameserver (the kubelet's `clusterDNS`), at the node address: KubeRay's Ray workers
find their head through `<cluster>-head-svc.<namespace>.svc.cluster.local`, a headless
Service. What it is not:

- A Service with a cluster IP resolves to its endpoints too (there is no virtual IP without
  kube-proxy), so a client reaches the pods only where the Service port equals the target
  port. Headless Services, the usual case for pod-to-pod traffic, behave as on any cluster.
- Only A queries get answers (the node has no IPv6); other types get an empty answer for a
  name that exists. `<hostname>.<service>.<namespace>.svc...` names a pod with that hostname.
- Names outside the cluster domain get NXDOMAIN at once: nothing leaves the machine, and a
  lookup fails fast instead of waiting on an unreachable resolver.

UDP only (answers are small; a resolver falls back to TCP only for a truncated answer).
Run as `python -m coworkgym_testbed.dns LISTEN_IP API_URL CA CERT KEY`.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DOMAIN = "cluster.local"
PORT = 53  # a pod's resolv.conf names nameservers, never ports
TTL = 5  # seconds: pods come and go during a test
CACHE_SECONDS = 1.0
TYPE_A = 1
CLASS_IN = 1
NOERROR, FORMERR, SERVFAIL, NXDOMAIN = 0, 1, 2, 3
log = logging.getLogger("cluster-dns")


@dataclass(frozen=True)
class Question:
    name: str  # lower case, without the trailing dot
    qtype: int
    qclass: int
    wire: bytes  # the question section as received, echoed in the answer


def parse_query(packet: bytes) -> tuple[int, int, Question]:
    """(id, flags, first question) of a query; ValueError when it is not one we can read."""
    if len(packet) < 12:
        raise ValueError("shorter than a DNS header")
    qid, flags, qdcount = struct.unpack("!HHH", packet[:6])
    if flags & 0x8000 or qdcount < 1:
        raise ValueError("not a query with a question")
    labels, pos = [], 12
    while True:
        if pos >= len(packet):
            raise ValueError("name runs past the packet")
        length = packet[pos]
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        pos += 1
        if length == 0:
            break
        labels.append(packet[pos : pos + length].decode("ascii", "replace"))
        pos += length
    if pos + 4 > len(packet):
        raise ValueError("question without type and class")
    qtype, qclass = struct.unpack("!HH", packet[pos : pos + 4])
    name = ".".join(labels).lower()
    return qid, flags, Question(name, qtype, qclass, packet[12 : pos + 4])


def build_answer(qid: int, flags: int, q: Question | None, rcode: int, ips: list[str]) -> bytes:
    """A response: authoritative, the question echoed, one A record per address."""
    rd = flags & 0x0100
    opcode = flags & 0x7800
    header_flags = 0x8000 | opcode | 0x0400 | rd | 0x0080 | rcode  # QR AA RD RA
    if q is None:
        return struct.pack("!HHHHHH", qid, header_flags, 0, 0, 0, 0)
    answers = b"".join(
        # the name as a pointer to the question's (offset 12), type A, class IN
        struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4) + socket.inet_aton(ip)
        for ip in ips
    )
    return struct.pack("!HHHHHH", qid, header_flags, 1, len(ips), 0, 0) + q.wire + answers


class Endpoints:
    """Service and EndpointSlice reads from the API server, cached for a second."""

    def __init__(self, api_url: str, tls: ssl.SSLContext) -> None:
        self.api_url = api_url.rstrip("/")
        self.tls = tls
        self._cache: dict[tuple[str, str], tuple[float, list[tuple[str, str | None]] | None]] = {}
        self._lock = threading.Lock()

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(f"{self.api_url}{path}", timeout=3, context=self.tls) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def of(self, namespace: str, service: str) -> list[tuple[str, str | None]] | None:
        """(address, hostname) of each endpoint of the Service; None if it does not exist."""
        key = (namespace, service)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        ns, svc = urllib.parse.quote(namespace), urllib.parse.quote(service)
        found: list[tuple[str, str | None]] | None = None
        if self._get(f"/api/v1/namespaces/{ns}/services/{svc}") is not None:
            selector = urllib.parse.quote(f"kubernetes.io/service-name={service}")
            slices = self._get(
                f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?labelSelector={selector}"
            )
            found = []
            for item in (slices or {}).get("items", []):
                if item.get("addressType") != "IPv4":
                    continue
                for ep in item.get("endpoints") or []:
                    # ready is true for every endpoint of a publishNotReadyAddresses Service
                    if ep.get("conditions", {}).get("ready") is False:
                        continue
                    found += [(addr, ep.get("hostname")) for addr in ep.get("addresses", [])]
        with self._lock:
            self._cache[key] = (time.monotonic(), found)
        return found


def resolve(name: str, endpoints: Endpoints) -> list[str] | None:
    """Addresses for a name, [] for a name that exists without any, None for no such name."""
    suffix = f".svc.{DOMAIN}"
    if not name.endswith(suffix):
        return None
    parts = name[: -len(suffix)].split(".")
    if len(parts) == 2:
        service, namespace = parts
        hostname = None
    elif len(parts) == 3:
        hostname, service, namespace = parts
    else:
        return None
    found = endpoints.of(namespace, service)
    if found is None:
        return None
    ips = sorted({addr for addr, host in found if hostname is None or host == hostname})
    if hostname is not None and not ips:
        return None
    return [ip for ip in ips if ipaddress.ip_address(ip).version == 4]


def answer(packet: bytes, endpoints: Endpoints) -> bytes | None:
    try:
        qid, flags, q = parse_query(packet)
    except ValueError:
        if len(packet) < 2:
            return None
        return build_answer(struct.unpack("!H", packet[:2])[0], 0, None, FORMERR, [])
    try:
        ips = resolve(q.name, endpoints)
    except (urllib.error.URLError, OSError, ValueError) as e:
        log.warning("%s: API server read failed: %s", q.name, e)
        return build_answer(qid, flags, q, SERVFAIL, [])
    if ips is None:
        return build_answer(qid, flags, q, NXDOMAIN, [])
    wanted = ips if q.qtype == TYPE_A and q.qclass == CLASS_IN else []
    log.info("%s type %d -> %s", q.name, q.qtype, wanted or "no records")
    return build_answer(qid, flags, q, NOERROR, wanted)


def query(
    server: str, name: str, timeout: float = 2.0, port: int = PORT
) -> tuple[int, list[str]]:
    """(rcode, A addresses) for `name` from the server at `server`:`port` (the readiness
    probe, and the tests)."""
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.strip(".").split(".")) + b"\0"
    packet = struct.pack("!HHHHHH", 0x4B52, 0x0100, 1, 0, 0, 0) + qname
    packet += struct.pack("!HH", TYPE_A, CLASS_IN)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, (server, port))
        reply = s.recv(4096)
    flags, _qd, ancount = struct.unpack("!HHH", reply[2:8])
    rcode = flags & 0xF
    # Our own answers only: the question is echoed as sent, each record is 16 bytes.
    pos, ips = len(packet), []
    for _ in range(ancount):
        ips.append(socket.inet_ntoa(reply[pos + 12 : pos + 16]))
        pos += 16
    return rcode, ips


def make_server(
    listen_ip: str, endpoints: Endpoints, port: int = PORT
) -> socketserver.ThreadingUDPServer:
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data, sock = self.request
            reply = answer(data, endpoints)
            if reply is not None:
                sock.sendto(reply, self.client_address)

    server = socketserver.ThreadingUDPServer((listen_ip, port), Handler)
    server.daemon_threads = True
    return server


def serve(listen_ip: str, endpoints: Endpoints) -> None:
    with make_server(listen_ip, endpoints) as server:
        log.info("serving *.svc.%s on %s:%d/udp", DOMAIN, listen_ip, PORT)
        server.serve_forever()


def main(argv: list[str]) -> None:
    listen_ip, api_url, ca, cert, key = argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    tls = ssl.create_default_context(cafile=ca)
    tls.load_cert_chain(cert, key)
    serve(listen_ip, Endpoints(api_url, tls))


if __name__ == "__main__":
    main(sys.argv[1:])
