"""A rollout's pods, as processes: the entry points of the Jobs a RolloutBatch creates.

    python -m coworkgym.rollout.pod fetch|episode|agent|verify|collect

Each step reads ``COWORKGYM_POD_INPUT`` (JSON) and the folders its pod mounts, writes
files, and reports one small JSON object in the termination log, which the operator reads
from the pod's status (so no step needs credentials for the API server). Nothing here
knows about Kubernetes; docs/rollouts-on-kubernetes.md says which pod mounts what.

- ``fetch``   packages → ``$DATA/packages/e<i>/private`` (all) and ``.../verifier``
              (without ``.user/``, ``.patch/``, ``solution/``); every rollout's folders.
- ``episode`` the user side of one rollout: the engine (harness, user simulator, record)
              on the package; shell commands go to the agent container's tool server;
              the final workspace and the record go to ``$RECORD``.
- ``agent``   the tool server in the agent container: runs each command it is sent in
              the live workspace (``$SHARED``), on the pod's loopback only.
- ``verify``  the verifier on a copy of the collected workspace; ``$VERIFIED``.
- ``collect`` records + verifications → the filter → the output store.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any

from ..package.package import EnvironmentPackage
from ..sandbox.base import Limits, Mount, Sandbox, SandboxResult
from ..sandbox.direct import DirectSandbox

MAX_MESSAGE_BYTES = 4000  # Kubernetes keeps at most 4096 bytes of a termination message
PRIVATE_DIRS = (".user", ".patch", "solution")
PENDING = "pending: verified in a separate pod"
DONE_MARKER = ".episode-done"  # the user container's "we are finished" to the agent's server


def _dir(name: str, default: str) -> Path:
    return Path(os.environ.get(name, default))


def _input() -> dict[str, Any]:
    raw = os.environ.get("COWORKGYM_POD_INPUT") or "{}"
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("COWORKGYM_POD_INPUT must be a JSON object")
    return value


def fit(result: dict[str, Any]) -> str:
    """The result as JSON that fits a termination message (long lists are cut)."""
    text = json.dumps(result, separators=(",", ":"))
    for key in ("environments", "funnel"):
        while len(text.encode()) > MAX_MESSAGE_BYTES and result.get(key):
            result[key].pop()
            result[f"more_{key}"] = result.get(f"more_{key}", 0) + 1
            text = json.dumps(result, separators=(",", ":"))
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        text = json.dumps({"ok": result.get("ok", False), "error": text[:3000]})
    return text


# ---- fetch ------------------------------------------------------------------------------
def fetch(payload: dict[str, Any]) -> dict[str, Any]:
    from ..release import fetch_package, make_s3_client, split_s3_uri
    from ..runtime.workspace import layout
    from .batch import manifest_locations

    data = _dir("COWORKGYM_DATA_DIR", "/data")
    client = make_s3_client()
    wanted: list[dict[str, str]] = list(payload.get("environments") or [])
    if payload.get("manifestUri"):
        bucket, key = split_s3_uri(payload["manifestUri"])
        local = Path(os.environ.get("TMPDIR", "/tmp")) / "manifest.jsonl"
        local.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        wanted = [{"name": "", "uri": uri} for uri in manifest_locations(local)]
    found = []
    for index, env in enumerate(wanted):
        if not env["uri"].startswith("s3://"):
            raise ValueError(f"environment {index}: {env['uri']} is not an s3:// package")
        private = data / "packages" / f"e{index}" / "private"
        if private.exists():  # a retried fetch: start the package over
            shutil.rmtree(private)
        fetch_package(env["uri"], private, client)
        pkg = EnvironmentPackage.load(private)
        verifier = private.parent / "verifier"
        if verifier.exists():
            shutil.rmtree(verifier)
        shutil.copytree(
            private, verifier, symlinks=True, ignore=shutil.ignore_patterns(*PRIVATE_DIRS)
        )
        found.append(
            {
                "name": env["name"] or pkg.name,
                "uri": env["uri"],
                "digest": pkg.digest(),
                "workdir": layout(pkg).workdir,  # where the agent container mounts it
            }
        )
    for index in range(len(found)):
        for policy in range(int(payload.get("policies", 1))):
            for sample in range(int(payload.get("samples", 1))):
                rollout = data / "rollouts" / f"e{index}-p{policy}-s{sample}"
                (rollout / "episode").mkdir(parents=True, exist_ok=True)
                (rollout / "verified").mkdir(parents=True, exist_ok=True)
    return {"ok": True, "environments": found}


# ---- the agent container's tool server -------------------------------------------------
class _ToolServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, workspace: Path, sandbox: Sandbox) -> None:
        self.workspace = workspace  # where this container mounts the live workspace
        self.sandbox = sandbox
        super().__init__(("127.0.0.1", port), _ToolHandler)


class _ToolHandler(BaseHTTPRequestHandler):
    server: _ToolServer

    def do_GET(self) -> None:
        self._reply(200, {"ok": True})

    def do_POST(self) -> None:
        if self.path == "/shutdown":
            self._reply(200, {"ok": True})
            threading.Thread(target=self.server.shutdown, daemon=True).start()
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            result = self._run(body)
        except (ValueError, KeyError, TypeError) as exc:
            self._reply(400, {"error": f"{type(exc).__name__}: {exc}"})
            return
        self._reply(200, asdict(result))

    def _run(self, body: dict[str, Any]) -> SandboxResult:
        """The user container names its own path of the workspace (``root``); here the
        same volume is mounted at ``self.server.workspace``, so sources are moved over.
        A source outside the workspace is refused: this container has nothing else."""
        root = PurePosixPath(str(body["root"]))
        mounts = []
        for m in body["mounts"]:
            source = PurePosixPath(posixpath.normpath(str(m["source"])))
            if not source.is_relative_to(root):
                raise ValueError(f"{source} is outside the shared workspace {root}")
            own = self.server.workspace / source.relative_to(root)
            mounts.append(Mount(own, str(m["target"]), bool(m["writable"])))
        return self.server.sandbox.run(
            [str(a) for a in body["argv"]],
            mounts,
            limits=Limits(**body.get("limits", {})),
            env={str(k): str(v) for k, v in (body.get("env") or {}).items()},
            cwd=str(body.get("cwd", "/")),
        )

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the commands' output is in the trajectory, not in the pod's log


def _agent_sandbox() -> Sandbox:
    # In the pod, the container is the sandbox and the workspace is mounted at the workdir,
    # so commands run as they are (coworkgym.sandbox.direct). Outside a pod (tests), set
    # COWORKGYM_AGENT_SANDBOX=bwrap to bind the workspace at the workdir with bubblewrap.
    if os.environ.get("COWORKGYM_AGENT_SANDBOX") == "bwrap":
        from ..sandbox import default_sandbox

        return default_sandbox()
    return DirectSandbox()


def agent(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Serve until the user container says it is done (a request, or the marker file)."""
    workspace = _dir("COWORKGYM_AGENT_WORKSPACE", "/app")
    port = int(os.environ.get("COWORKGYM_AGENT_PORT", "7300"))
    server = _ToolServer(port, workspace, _agent_sandbox())
    thread = threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True)
    thread.start()
    while thread.is_alive() and not (workspace / DONE_MARKER).exists():
        time.sleep(0.5)
    server.shutdown()
    server.server_close()
    return None  # no result: the user container's is the pod's


class RemoteSandbox:
    """The ``Sandbox`` of the user container: each command goes to the agent container's
    tool server (same pod, loopback) and runs there, on the shared workspace."""

    def __init__(self, url: str, root: Path, wait_s: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.root = root  # the workspace as this container mounts it
        self.wait_s = wait_s
        self._ready = False

    def _wait(self) -> None:
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2):
                    self._ready = True
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def run(
        self,
        argv: Sequence[str],
        mounts: Sequence[Mount],
        *,
        limits: Limits = Limits(),  # noqa: B008 - immutable
        env: Mapping[str, str] | None = None,
        cwd: str = "/",
    ) -> SandboxResult:
        if not self._ready:
            self._wait()
        body = {
            "argv": list(argv),
            "mounts": [
                {"source": str(m.source), "target": m.target, "writable": m.writable}
                for m in mounts
            ],
            "root": str(self.root),
            "limits": asdict(limits),
            "env": dict(env or {}),
            "cwd": cwd,
        }
        request = urllib.request.Request(
            self.url + "/run",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=limits.timeout_s + 30) as reply:
            return SandboxResult(**json.loads(reply.read()))

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(
                urllib.request.Request(self.url + "/shutdown", data=b"", method="POST"), timeout=5
            )


# ---- the episode (the user container) ---------------------------------------------------
def _copy_out(record: Path) -> tuple[Callable[..., Any], dict[str, bool]]:
    """A deferred verifier: the workspace and the claims go to ``record`` for the verify
    pod; the trajectory says its verdict is pending."""
    from .trajectory import VerificationRecord

    called = {"verify": False}

    def deferred(
        pkg: EnvironmentPackage, workspace: Path, workdir: str, claims: dict[str, Any]
    ) -> VerificationRecord:
        target = record / "workspace"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(
            workspace, target, symlinks=True, ignore=shutil.ignore_patterns(DONE_MARKER)
        )
        (record / "claims.json").write_text(json.dumps({"workdir": workdir, "claims": claims}))
        called["verify"] = True
        return VerificationRecord(valid=False, invalid_reason=PENDING)

    return deferred, called


def episode(payload: dict[str, Any]) -> dict[str, Any]:
    from .engine import RolloutEngine, RolloutLimits
    from .harness import PolicyConfig

    package = _dir("COWORKGYM_PACKAGE_DIR", "/package")
    record = _dir("COWORKGYM_RECORD_DIR", "/record")
    shared = _dir("COWORKGYM_SHARED_DIR", "/shared")  # the workspace volume, as mounted here
    remote = RemoteSandbox(payload.get("agentUrl") or "http://127.0.0.1:7300", shared)
    try:
        pkg = EnvironmentPackage.load(package)
        policy, sampling = payload["policy"], payload["policy"].get("sampling") or {}
        sample = int(payload.get("sample", 0))
        seed = sampling.get("seed")
        config = PolicyConfig(
            model=policy["model"],
            base_url=payload.get("gatewayUrl") if policy.get("baseUrl") else None,
            temperature=float(sampling.get("temperature", 0.7)),
            top_p=sampling.get("topP"),
            max_tokens=sampling.get("maxTokens"),
            seed=None if seed is None else int(seed) + sample,
            max_steps=int(sampling.get("maxSteps", 60)),
        )
        deferred, called = _copy_out(record)
        limits = RolloutLimits(timeout_s=payload.get("timeoutSeconds"))
        engine = RolloutEngine(
            sandbox=remote, limits=limits, workspace_dir=shared, verifier=deferred
        )
        with engine:
            trajectory = engine.run(
                pkg,
                policy["harness"],
                config,
                sample,
                uri=(payload.get("environment") or {}).get("uri"),
                # the cluster gateway's per-rollout token: the in-process gateway forwards
                # with it, and the harness sees only an in-process token
                api_key=os.environ.get("COWORKGYM_GATEWAY_TOKEN", "EMPTY"),
            )
    finally:
        (shared / DONE_MARKER).touch()
        remote.shutdown()
    (record / "trajectory.json").write_text(trajectory.model_dump_json())
    verification = trajectory.verification
    term = trajectory.termination
    reason = (
        verification.invalid_reason
        if verification is not None and not called["verify"]
        else f"{term.reason}: {term.detail}"
    )
    return {
        "ok": True,
        "id": payload.get("id"),
        "verify": called["verify"],
        "termination": term.reason,
        "reason": (reason or term.reason)[:500],
        "tokens": trajectory.usage.prompt_tokens + trajectory.usage.completion_tokens,
        "seconds": (trajectory.timings.finished_at - trajectory.timings.started_at).total_seconds()
        if trajectory.timings.finished_at
        else None,
        "simulatorFaults": len(trajectory.simulator_faults),
    }


# ---- verify -----------------------------------------------------------------------------
def verify(payload: dict[str, Any]) -> dict[str, Any]:
    from ..runtime.local import LocalRuntime
    from .verify import verify_rollout

    episode_dir = _dir("COWORKGYM_EPISODE_DIR", "/episode")
    package = _dir("COWORKGYM_PACKAGE_DIR", "/package")
    verified = _dir("COWORKGYM_VERIFIED_DIR", "/verified")
    claims = json.loads((episode_dir / "claims.json").read_text())
    pkg = EnvironmentPackage.load(package)
    runtime = LocalRuntime(sandbox=DirectSandbox())
    record = verify_rollout(
        runtime, pkg, episode_dir / "workspace", claims["workdir"], claims["claims"]
    )
    (verified / "verification.json").write_text(record.model_dump_json())
    return {
        "ok": True,
        "id": payload.get("id"),
        "valid": record.valid,
        "passed": record.passed,
        "reward": record.reward,
        "reason": (record.invalid_reason or "")[:500],
    }


# ---- collect ----------------------------------------------------------------------------
def collect(payload: dict[str, Any]) -> dict[str, Any]:
    from ..release import make_s3_client, split_s3_uri
    from .batch import S3Store
    from .filters import FilterContext, FilterSettings, filter_trajectories
    from .trajectory import Trajectory, VerificationRecord, dump_line

    rollouts = _dir("COWORKGYM_ROLLOUTS_DIR", "/rollouts")
    trajectories = []
    stored: dict[str, Path] = {}  # trajectory id -> the final workspace the episode left
    for rid in payload.get("ids", []):
        folder = rollouts / rid
        path = folder / "episode" / "trajectory.json"
        if not path.is_file():
            continue  # its pod died before a record: the batch's status says why
        trajectory = Trajectory.model_validate_json(path.read_text())
        stored[trajectory.id] = folder / "episode" / "workspace"
        verdict = folder / "verified" / "verification.json"
        if verdict.is_file():
            found = VerificationRecord.model_validate_json(verdict.read_text())
            trajectory = trajectory.model_copy(update={"verification": found})
        elif trajectory.verification is not None and (
            trajectory.verification.invalid_reason == PENDING
        ):
            lost = VerificationRecord(
                valid=False, invalid_reason="infrastructure: the verify pod gave no verdict"
            )
            trajectory = trajectory.model_copy(update={"verification": lost})
        trajectories.append(trajectory)
    settings = FilterSettings.model_validate(payload.get("filter") or {})
    # the filter recomputes each final workspace's digests where the episode stored it
    kept, report = filter_trajectories(trajectories, settings, FilterContext(workspace_of=stored))
    uri = str(payload["outputUri"]).rstrip("/")
    client = make_s3_client()
    store = S3Store(uri, client)
    for trajectory in trajectories:
        store.add(trajectory)
    store.close()
    bucket, prefix = split_s3_uri(uri)
    base = f"{prefix}/" if prefix else ""
    kept_body = "".join(dump_line(t) for t in kept).encode()  # each line ends with \n
    client.put_object(Bucket=bucket, Key=f"{base}kept.jsonl", Body=kept_body)
    funnel = report.model_dump(mode="json", by_alias=True)
    client.put_object(Bucket=bucket, Key=f"{base}funnel.json", Body=json.dumps(funnel).encode())
    return {
        "ok": True,
        "raw": report.raw,
        "kept": report.kept,
        "uri": uri,
        "funnel": [
            {"rule": s.rule, "dropped": s.dropped, "kept": s.kept, "reasons": s.reasons}
            for s in report.stages
        ],
    }


STEPS: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "fetch": fetch,
    "episode": episode,
    "agent": agent,
    "verify": verify,
    "collect": collect,
}


def main(argv: list[str]) -> int:
    step = argv[0] if argv else ""
    log_path = Path(os.environ.get("COWORKGYM_TERMINATION_LOG", "/dev/termination-log"))
    if step not in STEPS:
        print(f"usage: python -m coworkgym.rollout.pod {'|'.join(STEPS)}", file=sys.stderr)
        return 2
    try:
        result = STEPS[step](_input())
        code = 0
    except Exception as exc:  # reported, so the operator can say why
        traceback.print_exc()
        result, code = {"ok": False, "step": step, "error": f"{type(exc).__name__}: {exc}"}, 1
    if result is None:
        return code
    message = fit(result)
    print(message)
    with contextlib.suppress(OSError):  # outside a pod: no termination log; stdout has it
        log_path.write_text(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
