"""python -m coworkgym_testbed up|down|status|env|schemas

up       start the test-bed in ./.testbed (or $COWORKGYM_TESTBED_DIR), or reuse a healthy one;
         --node adds a node (containerd + kubelet, root only) on which pods really run;
         --kuberay KubeRay's CRDs and operator (added to a running test-bed in place)
down     stop it (logs stay in the run dir)
status   one line per component; exit 1 unless all are running and ready
env      `export` lines for a shell: eval "$(python -m coworkgym_testbed env)"; with a node,
         also the relays pods use (COWORKGYM_API_NODE_PORT, COWORKGYM_S3_NODE_ENDPOINT, ...)
schemas  write kubeconform schemas from the running API server into DIR
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from pathlib import Path

from . import testbed as tb_mod
from .binaries import MissingBinaryError, which
from .node import NODE_IP, NodeError
from .schemas import SCHEMA_TEMPLATE, generate


def _say(msg: str) -> None:
    print(f"[testbed] {msg}", file=sys.stderr, flush=True)


def _loaded(run_dir: Path | None) -> tb_mod.Testbed:
    tb = tb_mod.Testbed.load(run_dir)
    if tb is None:
        _say(
            f"no test-bed recorded in {run_dir or tb_mod.default_run_dir()}: run `up` first, or "
            "name the run directory of a running one with --dir or $COWORKGYM_TESTBED_DIR"
        )
        raise SystemExit(1)
    return tb


def env_command(run_dir: Path) -> str:
    """The `env` command line with absolute paths, so that it works from any folder."""
    python = shlex.quote(str(Path(sys.executable).absolute()))
    return f"{python} -m coworkgym_testbed --dir {shlex.quote(str(run_dir))} env"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m coworkgym_testbed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--dir", type=Path, help="run directory (default: $COWORKGYM_TESTBED_DIR or ./.testbed)"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--timeout", type=float, default=300.0)
    p_up.add_argument("--node", action="store_true", help="with a node: pods really run")
    p_up.add_argument(
        "--kuberay", action="store_true", help="with KubeRay's operator and CRDs (kuberay.py)"
    )
    sub.add_parser("down")
    sub.add_parser("status")
    sub.add_parser("env")
    p_schemas = sub.add_parser("schemas")
    p_schemas.add_argument("out", type=Path)
    args = ap.parse_args(argv)

    if args.cmd == "up":
        t0 = time.monotonic()
        try:
            tb, started = tb_mod.up(
                args.dir, timeout=args.timeout, say=_say, node=args.node, kuberay=args.kuberay
            )
        except (tb_mod.StartupError, MissingBinaryError, NodeError) as e:
            _say(f"FAILED: {e}")
            return 1
        if started:
            _say(f"up in {time.monotonic() - t0:.1f}s; logs in {tb.run_dir / 'logs'}")
        _say(f'use it from a shell (any folder): eval "$({env_command(tb.run_dir)})"')
        return 0
    if args.cmd == "down":
        stopped = tb_mod.down(args.dir)
        _say("stopped" if stopped else "nothing recorded; nothing to stop")
        return 0
    tb = _loaded(args.dir)
    if args.cmd == "status":
        running = tb.running()
        for name, alive in running.items():
            rec = tb.processes[name]
            print(f"{name:<24} pid {rec.pid:<8} {'running' if alive else 'DEAD':<8} {rec.log}")
        print(f"{'kube-apiserver':<24} {tb.api_url}")
        print(f"{'s3':<24} {tb.s3_endpoint} bucket={tb.s3_bucket}")
        if tb.node:
            print(f"{'s3 (from pods)':<24} {tb.s3_node_endpoint}")
            print(f"{'api (from pods)':<24} https://{NODE_IP}:{tb.api_node_port}")
        print(f"{'kubeconfig':<24} {tb.kubeconfig}")
        print(f"{'shell':<24} eval \"$({env_command(tb.run_dir)})\"")
        healthy = tb.healthy()
        print("healthy" if healthy else "NOT healthy")
        return 0 if healthy else 1
    if args.cmd == "env":
        for key, value in tb.env().items():
            print(f"export {key}={shlex.quote(value)}")
        # The built kubectl/helm/kubeconform first on PATH (an older kubectl may be installed).
        dirs = []
        for tool in ("kubectl", "helm", "kubeconform"):
            with contextlib.suppress(MissingBinaryError):
                dirs.append(str(which(tool).parent))
        if dirs:
            print(f'export PATH={shlex.quote(":".join(dict.fromkeys(dirs)))}:"$PATH"')
        return 0
    if args.cmd == "schemas":
        n = generate(tb.api_url, tb.cluster.tls(), args.out)
        _say(f"{n} schemas written; kubeconform -schema-location '{args.out / SCHEMA_TEMPLATE}'")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
