"""What the node makes on the machine, outside its run dir, and how teardown removes exactly
that and nothing else:

- the bridge `cgtb0` with the node address 10.244.0.1/24 (pods get 10.244.0.10-250); the
  node address is never the machine's own; the service range routed to it;
- the fence: two chains in the iptables mangle table that keep pod traffic on the bridge (a
  pod may reach other pods and the node's relay ports and its DNS port, nothing beyond the
  machine; kube-proxy's DNAT to a Service's endpoint comes before it);
- two sysctls (forwarding, bridged packets through iptables), put back afterwards;
- the cgroup `/coworkgym-testbed` in every v1 hierarchy (the kubelet's cgroupRoot: every pod
  process lives below it, so teardown finds them there rather than by name), and the same
  path in the unified (v2) hierarchy, where runc also places each container on a hybrid
  machine;
- the network namespaces the CRI made for pods (`/run/netns/cni-*` that were not there
  before);
- the chains the kubelet, kube-proxy and kube-router write, and kube-router's ipsets.

There is one node per machine (all of the above is the machine's): a record in /run names
the run that owns it, so a crashed run's leftovers are removed before a new node starts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from ..components import SERVICE_CIDR
from ..pki import NODE_IP

BRIDGE = "cgtb0"
POD_SUBNET = "10.244.0.0/24"
POD_RANGE = ("10.244.0.10", "10.244.0.250")
CGROUP_ROOT = "coworkgym-testbed"
CGROUP_FS = Path("/sys/fs/cgroup")
FW_INPUT, FW_FORWARD = "COWORKGYM-TB-INPUT", "COWORKGYM-TB-FORWARD"
NETNS_DIR = Path("/run/netns")


class NodeError(RuntimeError):
    pass


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and cp.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed ({cp.returncode}): {cp.stderr.strip()}")
    return cp


def require_root() -> None:
    if os.geteuid() != 0:
        raise NodeError(
            "the test-bed node needs root (containerd, a bridge, iptables, cgroups); "
            "run `up --node` as root, or start the test-bed without a node"
        )


def containerd_socket(run_dir: Path) -> Path:
    return run_dir / "containerd" / "containerd.sock"


def ctr(run_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    sock = containerd_socket(run_dir)
    return _run("ctr", f"--address={sock}", "--namespace=k8s.io", *args, check=check)


# The machine-wide record of the node that runs now: a crashed run's leftovers are found by
# it and removed before a new node starts.
NODE_RECORD = Path("/run/coworkgym-testbed-node.json")


def claim_machine(run_dir: Path) -> None:
    if NODE_RECORD.exists():
        other = Path(json.loads(NODE_RECORD.read_text())["run_dir"])
        from ..testbed import Testbed

        tb = Testbed.load(other)
        if tb is not None and tb.node and all(tb.running().values()):
            raise NodeError(
                f"a test-bed node already runs on this machine (run dir {other}); there can be "
                f"only one: `python -m coworkgym_testbed --dir {other} down` first"
            )
        teardown(other)
    elif _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        raise NodeError(
            f"bridge {BRIDGE} exists but no test-bed node is recorded in {NODE_RECORD}; "
            f"remove it (`ip link delete {BRIDGE}`) if nothing else uses it"
        )
    NODE_RECORD.write_text(json.dumps({"run_dir": str(run_dir)}))


def teardown(run_dir: Path) -> None:
    """Remove everything the node made (processes in its cgroups, shims, mounts, network
    namespaces, cgroups, bridge, firewall). Safe to repeat."""
    kill_pod_processes()
    kill_shims(run_dir)
    unmount_below(run_dir)
    before_file = run_dir / "containerd" / "netns-before.json"
    if before_file.exists():
        before = set(json.loads(before_file.read_text()))
        for ns in sorted(netns_now() - before):
            _run("ip", "netns", "delete", ns, check=False)
    cgroups_down()
    network_down(run_dir)
    if NODE_RECORD.exists() and json.loads(NODE_RECORD.read_text())["run_dir"] == str(run_dir):
        NODE_RECORD.unlink()


# ---- network ------------------------------------------------------------------------------
def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # The mangle table: the NetworkPolicy controller (kube-router) owns the filter table and
    # rewrites it on every sync, with its own ACCEPTs first. A DROP here is final whatever
    # the filter table says, so the node's fence holds with or without policies.
    return _run("iptables", "-w", "5", "-t", "mangle", *args, check=check)


# Kernel settings the node changes, and why; teardown puts back what the machine had.
SYSCTLS = {
    # the CNI bridge plugin turns forwarding on (the fence below keeps it on the bridge)
    "net/ipv4/ip_forward": None,
    # bridged pod-to-pod packets must pass iptables for NetworkPolicies to apply to them
    "net/bridge/bridge-nf-call-iptables": "1",
}


def network_up(run_dir: Path, relay_ports: list[int]) -> None:
    """The bridge with the node address, and the fence that keeps pods on it."""
    saved = {key: (Path("/proc/sys") / key).read_text().strip() for key in SYSCTLS}
    (run_dir / "node-sysctl.json").write_text(json.dumps(saved))
    for key, value in SYSCTLS.items():
        if value is not None:
            (Path("/proc/sys") / key).write_text(value)
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    # The machine's own traffic to a Service's cluster IP (the operator probing a model
    # server, a test) meets kube-proxy's DNAT in OUTPUT; this route makes sure it goes to
    # the bridge, not out of the default route, should no DNAT match yet. Goes with the bridge.
    _run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", NODE_IP)
    # INPUT from pods: only the relay ports and DNS on the node address, and replies to what the
    # node itself opened (the kubelet's probes, tests reaching into pods).
    _iptables("-N", FW_INPUT)
    _iptables("-A", FW_INPUT, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
    for port in relay_ports:
        _iptables("-A", FW_INPUT, "-d", NODE_IP, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")
    # CoreDNS (services.py), behind the kube-dns Service: kube-proxy's DNAT comes first, so
    # these rules see the node address and port 53
    for proto in ("udp", "tcp"):
        _iptables("-A", FW_INPUT, "-d", NODE_IP, "-p", proto, "--dport", "53", "-j", "ACCEPT")
    _iptables("-A", FW_INPUT, "-j", "DROP")
    _iptables("-I", "INPUT", "-i", BRIDGE, "-j", FW_INPUT)
    # FORWARD: pod to pod on the bridge passes on (to NetworkPolicies in the filter table);
    # nothing is routed off the bridge, either way.
    _iptables("-N", FW_FORWARD)
    _iptables("-A", FW_FORWARD, "-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN")
    _iptables("-A", FW_FORWARD, "-j", "DROP")
    _iptables("-I", "FORWARD", "-i", BRIDGE, "-j", FW_FORWARD)
    _iptables("-I", "FORWARD", "-o", BRIDGE, "-j", FW_FORWARD)


def network_down(run_dir: Path) -> None:
    for chain, hook, flag in (
        (FW_INPUT, "INPUT", "-i"),
        (FW_FORWARD, "FORWARD", "-i"),
        (FW_FORWARD, "FORWARD", "-o"),
    ):
        while _iptables("-D", hook, flag, BRIDGE, "-j", chain, check=False).returncode == 0:
            pass
    for chain in (FW_INPUT, FW_FORWARD):
        _iptables("-F", chain, check=False)
        _iptables("-X", chain, check=False)
    _run("ip", "link", "delete", BRIDGE, check=False)
    saved = run_dir / "node-sysctl.json"
    if saved.exists():
        for key, value in json.loads(saved.read_text()).items():
            (Path("/proc/sys") / key).write_text(value)
        saved.unlink()


def cni_config() -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "coworkgym-testbed",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                # No masquerading and no portmap: the only NAT is kube-proxy's, to Services.
                "ipMasq": False,
                # a pod may reach itself through its own Service (kube-proxy masquerades that)
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": POD_SUBNET,
                                "rangeStart": POD_RANGE[0],
                                "rangeEnd": POD_RANGE[1],
                                "gateway": NODE_IP,
                            }
                        ]
                    ],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "loopback"},
        ],
    }


def netns_now() -> set[str]:
    return {p.name for p in NETNS_DIR.glob("cni-*")} if NETNS_DIR.is_dir() else set()


# ---- cgroups and mounts -------------------------------------------------------------------
def _hierarchies(unified: bool = False) -> list[Path]:
    """The mounted cgroup v1 hierarchies the kubelet uses (cpu, memory, pids, ...); with
    `unified`, also the v2 hierarchy of a hybrid machine, which the kubelet does not manage
    but runc fills (one cgroup per pod and container, left empty when they stop)."""
    return [
        p
        for p in sorted(CGROUP_FS.iterdir())
        if p.is_dir() and (p / "cgroup.procs").exists() and (unified or p.name != "unified")
    ]


def cgroups_up() -> None:
    for h in _hierarchies():
        root = h / CGROUP_ROOT
        root.mkdir(exist_ok=True)
        if h.name == "cpuset":  # a v1 cpuset child starts empty; no task may join it then
            for f in ("cpuset.cpus", "cpuset.mems"):
                (root / f).write_text((h / f).read_text())


def _cgroup_dirs_deepest_first(h: Path, name: str = CGROUP_ROOT) -> list[Path]:
    root = h / name
    if not root.is_dir():
        return []
    return [*sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), root]


def kill_pod_processes(name: str = CGROUP_ROOT) -> int:
    """SIGKILL every process left in the node's cgroups (containers, pause), in every
    hierarchy. Returns how many."""
    killed: set[int] = set()
    for _ in range(20):
        pids: set[int] = set()
        for h in _hierarchies(unified=True):
            for d in _cgroup_dirs_deepest_first(h, name):
                with contextlib.suppress(OSError):
                    pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        pids -= {os.getpid()}
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= pids
        time.sleep(0.2)
    return len(killed)


def cgroups_down(name: str = CGROUP_ROOT) -> list[Path]:
    """Remove the node's cgroups in every hierarchy, the unified one included. Returns those
    that could not be removed (a process still in them)."""
    left = []
    for h in _hierarchies(unified=True):
        for d in _cgroup_dirs_deepest_first(h, name):
            try:
                d.rmdir()
            except OSError:
                left.append(d)
    return left


def kill_shims(run_dir: Path) -> None:
    """containerd's per-pod shims outlive containerd; they are ours when their command line
    names this run's containerd socket."""
    sock = str(containerd_socket(run_dir)).encode()
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc_dir / "cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and sock in argv:
                os.kill(int(proc_dir.name), signal.SIGKILL)


def unmount_below(*roots: Path) -> None:
    """Unmount what containerd and the kubelet left mounted (rootfs overlays, tmpfs volumes,
    netns binds), deepest first."""
    prefixes = tuple(str(r.resolve()) + "/" for r in roots)
    mounts: list[str] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefixes):
            mounts.append(point)
    for point in sorted(set(mounts), key=lambda m: -m.count("/")):
        _run("umount", "-l", point, check=False)


_KUBE_ROUTER_CHAINS = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
_KUBE_ROUTER_SETS = ("KUBE-SRC-", "KUBE-DST-", "TMP-")
KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")


def without_chains(dump: str, prefixes: tuple[str, ...]) -> str | None:
    """An `iptables-save` dump of one table without the chains named with `prefixes` and
    without every rule in or jumping to them; None when there is nothing to remove."""
    kept, dropped = [], False
    for line in dump.splitlines():
        words = line.split()
        declared = words[0][1:] if words and words[0].startswith(":") else ""
        if (declared and declared.startswith(prefixes)) or (
            line.startswith("-A ") and any(w.startswith(prefixes) for w in words[1:])
        ):
            dropped = True
            continue
        kept.append(line)
    return "\n".join(kept) + "\n" if dropped else None


def remove_chains(table: str, prefixes: tuple[str, ...]) -> None:
    """Remove chains named with `prefixes` (and the rules using them) from an iptables table;
    every other line of the table is kept."""
    rest = without_chains(_run("iptables-save", "-t", table, check=False).stdout, prefixes)
    if rest is not None:
        subprocess.run(
            ["iptables-restore", "-w", "5", "-T", table],
            input=rest,
            text=True,
            capture_output=True,
            check=True,
        )


def remove_network_policy_rules() -> None:
    """kube-router's chains in the filter table, and its ipsets."""
    remove_chains("filter", _KUBE_ROUTER_CHAINS)
    for name in _run("ipset", "list", "-n", check=False).stdout.split():
        if name.startswith(_KUBE_ROUTER_SETS):
            _run("ipset", "destroy", name, check=False)
