"""LLM-backed roles as the operator's stage Jobs run them, without a cluster: each stage is
`python -m coworkgym.roles.job <stage>` in a process of its own, given exactly the
environment its Job's container gets (the stage input, the gateway's URL, the token from
the environment's gateway-tokens Secret), with the role volumes as folders. The gateway is
the deployed one's code (signed tokens, upstream keys as files) in front of a scripted
OpenAI-compatible upstream that refuses any key but the real one.

Two ways to run a stage: as in a pod (the process in a bubblewrap root made like the pod's:
the machine's folders read-only, the role volumes at /work/<role>, the Job's emptyDirs at
their paths, so the roles run with coworkgym.sandbox.direct, in place), and as on a
workstation (COWORKGYM_STAGE_SANDBOX=bwrap: the roles' own bubblewrap sandboxes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coworkgym.llm.gateway import Gateway
from coworkgym.llm.serve import signed_resolver
from coworkgym.package.package import EnvironmentPackage
from coworkgym.spec import EnvironmentSpec
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment import builders
from tests.fixtures.llm.server import FIXTURES, ScriptedServer
from tests.integration.test_llm_roles import MODEL, llm_spec

# generous: a hang guard, not a speed goal; under the full suite's load one stage took over
# 150 s here (the Builder's model loop, then the detector in a sandbox)
pytestmark = pytest.mark.timeout(900)
KEY, SIGNING = "sk-upstream-only-the-gateway-holds", "operator-signing-key"
STAGES = ("builder", "verifier", "detector", "release")


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer.from_fixture("build_ok", expected_key=KEY) as server:
        yield server


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    keys = tmp_path / "gateway-keys"  # the gateway's upstreamKeysSecret, as mounted
    keys.mkdir()
    (keys / "llm-upstream").write_text(KEY)
    with Gateway(resolve=signed_resolver(SIGNING, keys)) as gw:
        yield gw


def environment(upstream: ScriptedServer) -> tuple[dict[str, Any], EnvironmentSpec]:
    spec = llm_spec()
    for role in ("builder", "verifier"):
        backend = getattr(spec.backends, role)
        backend.kind, backend.model, backend.base_url = "llm", MODEL, upstream.url
        backend.api_key_secret = "llm-upstream"
    env = {
        "metadata": {"name": "llm-env", "namespace": "gym", "uid": "4f1c", "generation": 1},
        "spec": spec.to_wire(),
    }
    return env, spec


def pod_root(job: dict[str, Any], volumes: Path, log: Path, store: Path) -> list[str]:
    """bubblewrap arguments for a root like the Job's pod: the machine's folders read-only,
    its volumes (the role volumes from ``volumes``, emptyDirs fresh), the termination log,
    and ``store`` (the release's target: the object store, outside the pod)."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    targets = {m["mountPath"] for m in container["volumeMounts"]}
    argv = ["bwrap", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in ("proc", "dev", "sys", "tmp", "run"):
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry), str(entry)]
        elif any(t.startswith(f"{entry}/") for t in targets):  # /work: the pod's volumes
            argv += ["--dir", str(entry)]  # there, and the machine's (this checkout)
            for child in sorted(entry.iterdir()):
                argv += ["--ro-bind", str(child), str(child)]
        elif entry.is_dir():
            argv += ["--ro-bind", str(entry), str(entry)]
    for mount in container["volumeMounts"]:
        role = mount["name"]
        if role in builders.ROLE_VOLUMES:
            flag = "--ro-bind" if mount.get("readOnly") else "--bind"
            argv += [flag, str(volumes / role), mount["mountPath"]]
        else:  # an emptyDir
            argv += ["--tmpfs", mount["mountPath"]]
    # this checkout and its venv stand for the image's code: under /tmp (a clone there)
    # they would be hidden by the pod's own /tmp; bound last, over any emptyDir
    for code in sorted({Path(sys.prefix).resolve(), Path(__file__).resolve().parents[2]}):
        if code.parts[1:2] in (("tmp",), ("run",)):
            argv += ["--ro-bind", str(code), str(code)]
    log.touch()
    store.mkdir(exist_ok=True)
    return [*argv, "--bind", str(log), "/dev/termination-log", "--bind", str(store), str(store)]


def run_stage(
    job: dict[str, Any],
    secret: dict[str, Any],
    volumes: Path,
    tmp_path: Path,
    *,
    in_pod: bool = False,
) -> dict[str, Any]:
    """The Job's container, as a process: its environment (Secret references resolved),
    its command, as in its pod or on a workstation; the result it reports."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    for var in container["env"]:
        if "valueFrom" in var:
            ref = var["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            env[var["name"]] = secret["stringData"][ref["key"]]
        else:
            env[var["name"]] = var["value"]
    log = tmp_path / f"{container['command'][-1]}.termination-log"
    store = tmp_path / "released"
    env["COWORKGYM_RELEASE_URI"] = str(store)  # the operator's default target
    argv = [sys.executable, *container["command"][1:]]
    if in_pod:  # the Job's own paths (/work/<role>, /dev/termination-log)
        argv = [*pod_root(job, volumes, log, store), *argv]
    else:
        for role in builders.ROLE_VOLUMES:
            env[f"COWORKGYM_{role.upper()}_DIR"] = str(volumes / role)
        env |= {"COWORKGYM_STAGE_SANDBOX": "bwrap", "COWORKGYM_TERMINATION_LOG": str(log)}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert log.is_file(), done.stdout + done.stderr
    assert log.read_text(), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(log.read_text())
    assert done.returncode == (0 if result["ok"] else 1), done.stderr
    return result


@pytest.mark.parametrize("in_pod", [True, False], ids=["as-in-a-pod", "on-a-workstation"])
def test_llm_stage_jobs_build_and_release_through_the_gateway_with_a_signed_token(
    upstream: ScriptedServer, gateway: Gateway, tmp_path: Path, in_pod: bool
) -> None:
    env, spec = environment(upstream)
    settings = OperatorSettings(
        gateway_url=gateway.url, gateway_signing_key=SIGNING, environment_token_budget=50_000
    )
    secret = builders.gateway_tokens(env, spec, settings)
    assert sorted(secret["stringData"]) == ["builder", "verifier"]
    volumes = tmp_path / "volumes"
    for role in builders.ROLE_VOLUMES:
        (volumes / role).mkdir(parents=True)
    results = {}
    for stage in STAGES:
        job = builders.stage_job(env, spec, stage, 0, 1, [], settings)
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert labels[builders.LABEL_EGRESS] == ("gateway" if stage in ("builder", "verifier")
                                                 else "object-store" if stage == "release"
                                                 else "none")  # fmt: skip
        results[stage] = run_stage(job, secret, volumes, tmp_path, in_pod=in_pod)
        assert results[stage]["ok"], results[stage]

    assert results["detector"]["defects"] == []
    package = EnvironmentPackage.load(tmp_path / "released" / "llm-env")
    assert package.name == "coworkgym/iowa-generation-by-source"
    # every model call went through the gateway, charged to the environment (uid included),
    # with the key only the gateway holds; each role reported its own share
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in upstream.requests)
    assert upstream.remaining("builder") == upstream.remaining("verifier") == 0
    charged = gateway.usage("gym/llm-env/4f1c")
    assert charged.requests == len(upstream.requests) == 9
    reported = [results[s]["usage"] for s in ("builder", "verifier")]
    assert [u["requests"] for u in reported] == [5, 4]
    assert sum(u["prompt_tokens"] + u["completion_tokens"] for u in reported) == (
        charged.total_tokens
    )
    assert "usage" not in results["detector"] and "usage" not in results["release"]


def test_a_spent_environment_budget_stops_the_builder_for_good(
    upstream: ScriptedServer, gateway: Gateway, tmp_path: Path
) -> None:
    env, spec = environment(upstream)
    # 120 tokens per scripted reply: the budget admits two model calls
    settings = OperatorSettings(
        gateway_url=gateway.url, gateway_signing_key=SIGNING, environment_token_budget=200
    )
    secret = builders.gateway_tokens(env, spec, settings)
    volumes = tmp_path / "volumes"
    (volumes / "builder").mkdir(parents=True)
    job = builders.stage_job(env, spec, "builder", 0, 1, [], settings)
    result = run_stage(job, secret, volumes, tmp_path)
    assert result["ok"] is False and result["retryable"] is False, result
    assert result["error"].startswith("tokens_exhausted"), result
    assert result["usage"]["requests"] == 2  # what it used before the gateway said no
    assert len(upstream.requests) == 2


def test_a_pod_given_no_gateway_fails_its_llm_stage_saying_why(
    upstream: ScriptedServer, tmp_path: Path
) -> None:
    env, spec = environment(upstream)
    job = builders.stage_job(env, spec, "builder", 0, 1, [], OperatorSettings())
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [v for v in container["env"] if not v["name"].startswith("COWORKGYM_GATE")]
    (tmp_path / "volumes" / "builder").mkdir(parents=True)
    result = run_stage(job, {"metadata": {"name": ""}}, tmp_path / "volumes", tmp_path)
    assert result["ok"] is False and result["retryable"] is False
    assert "gateway.enabled" in result["error"] and upstream.requests == []


def test_the_detector_stage_runs_the_llm_review_through_the_gateway_too(
    gateway: Gateway, tmp_path: Path
) -> None:
    """backends.detector of kind llm: the detector's pod runs its checks, then the review
    (in place: the package at /package, a scratch at /scratch), whose one defect with
    evidence that checks out goes into the stage's result."""
    lanes = json.loads((FIXTURES / "build_ok.json").read_text())["lanes"]
    lanes |= json.loads((FIXTURES / "review.json").read_text())["lanes"]
    with ScriptedServer.from_lanes(lanes, expected_key=KEY) as upstream:
        env, spec = environment(upstream)
        spec.backends.detector = spec.backends.builder.model_copy()
        env["spec"] = spec.to_wire()
        settings = OperatorSettings(gateway_url=gateway.url, gateway_signing_key=SIGNING)
        secret = builders.gateway_tokens(env, spec, settings)
        assert sorted(secret["stringData"]) == ["builder", "detector", "verifier"]
        volumes = tmp_path / "volumes"
        for role in builders.ROLE_VOLUMES:
            (volumes / role).mkdir(parents=True)
        results = {}
        for stage in ("builder", "verifier", "detector"):
            job = builders.stage_job(env, spec, stage, 0, 1, [], settings)
            labels = job["spec"]["template"]["metadata"]["labels"]
            assert labels[builders.LABEL_EGRESS] == "gateway"
            results[stage] = run_stage(job, secret, volumes, tmp_path, in_pod=True)
            assert results[stage]["ok"], results[stage]
    found = results["detector"]["defects"]
    assert [(d["code"], d["owner"]) for d in found] == [("ACCEPTS_SHORTCUT", "verifier")]
    assert results["detector"]["usage"]["requests"] == 4
    assert gateway.usage("gym/llm-env/4f1c").requests == 5 + 4 + 4
