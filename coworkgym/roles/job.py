"""A role stage as a process: the entry point of every sandbox Job the operator creates.

    python -m coworkgym.roles.job builder|verifier|detector|release

Input: ``COWORKGYM_STAGE_INPUT`` (JSON: name, spec, iteration, feedback). A Builder or
Verifier Constructor whose backend is ``llm`` (and the Issue Detector's review, where
``backends.detector`` is) runs its agent through the cluster's LLM gateway:
``COWORKGYM_GATEWAY_URL`` and the signed token ``COWORKGYM_GATEWAY_TOKEN``, which the
operator hands the pod (never an upstream key); its model calls and tokens go into the
result (``usage``), failed or not. Volumes: the
Builder writes only ``$COWORKGYM_BUILDER_DIR``; the Verifier Constructor reads it and writes
only ``$COWORKGYM_VERIFIER_DIR``; the Issue Detector reads both and writes only
``$COWORKGYM_SCRATCH_DIR``. Result: one small JSON object in the termination log (read by
the controller from the pod status, so no role needs credentials for the API server).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..detector import IssueDetector
from ..detector.defects import Defect
from ..package.assemble import assemble
from ..package.package import EnvironmentPackage
from ..runtime.local import LocalRuntime
from ..sandbox.direct import DirectSandbox
from ..spec import EnvironmentSpec, spec_problems
from . import io
from .base import Builder, RoleError, RoleRequest, VerifierConstructor
from .procedural import ProceduralBuilder, ProceduralVerifierConstructor

MAX_MESSAGE_BYTES = 4000  # Kubernetes keeps at most 4096 bytes of a termination message
MAX_DEFECTS = 12


def _dir(name: str, default: str) -> Path:
    return Path(os.environ.get(name, default))


def _in_pod() -> bool:
    # Inside a pod, the pod is the sandbox (see coworkgym.sandbox.direct); locally the same
    # code can still use bubblewrap by setting COWORKGYM_STAGE_SANDBOX=bwrap.
    return os.environ.get("COWORKGYM_STAGE_SANDBOX") != "bwrap"


def _runtime() -> LocalRuntime:
    return LocalRuntime(sandbox=DirectSandbox()) if _in_pod() else LocalRuntime()


def _llm_role(stage: str, spec: EnvironmentSpec, used: list[Any], name: str = "") -> Any:
    """The stage's LLM-backed role (for the detector: its review, of environment ``name``),
    through the cluster's gateway; None when the spec asks for the procedural one.
    Appended to ``used``, whose usage the result reports."""
    if getattr(spec.backends, stage).kind != "llm":
        return None
    from ..llm.review import LLMReviewer
    from ..llm.session import GatewaySession  # the `llm` extra (openai): in the role image
    from .llm import LLMBuilder, LLMVerifierConstructor, llm_settings

    session = GatewaySession.from_env(
        llm_settings(spec), stage_timeout_s=spec.budget.stage_timeout_seconds
    )
    if session is None:
        raise RoleError(
            f"spec.backends.{stage} is an llm backend, but this pod was given no LLM gateway "
            "(COWORKGYM_GATEWAY_URL and a token): the operator needs the chart's "
            "gateway.enabled",
            retryable=False,
        )
    role: Any
    if stage == "detector":
        role = LLMReviewer(session, name, _runtime().sandbox, in_place=_in_pod())
    else:
        kind = LLMBuilder if stage == "builder" else LLMVerifierConstructor
        role = kind(session, _runtime(), in_place=_in_pod())
    used.append(role)
    return role


def usage_of(roles: list[Any]) -> dict[str, int] | None:
    """The model calls and tokens of the stage's LLM roles; None when none ran."""
    counted = [r.usage for r in roles if r.usage is not None]
    if not counted:
        return None
    return {
        "requests": sum(u.requests for u in counted),
        "prompt_tokens": sum(u.prompt_tokens for u in counted),
        "completion_tokens": sum(u.completion_tokens for u in counted),
    }


def _spec(wire: Any) -> EnvironmentSpec:
    """The stage's spec; one the models refuse is the user's to fix, so never retried."""
    try:
        return EnvironmentSpec.model_validate(wire)
    except ValidationError as exc:
        problems = "; ".join(spec_problems(exc, "spec."))
        raise RoleError(f"the spec is invalid: {problems}", retryable=False) from exc


def run_stage(stage: str, payload: dict[str, Any], used: list[Any] | None = None) -> dict[str, Any]:
    """One stage; the LLM roles it ran are appended to ``used`` (for their usage)."""
    used = [] if used is None else used
    spec = _spec(payload["spec"])
    feedback = [Defect.model_validate(d) for d in payload.get("feedback", [])]
    request = RoleRequest(payload["name"], spec, int(payload.get("iteration", 0)), feedback)
    builder_dir = _dir("COWORKGYM_BUILDER_DIR", "/work/builder")
    verifier_dir = _dir("COWORKGYM_VERIFIER_DIR", "/work/verifier")
    scratch_dir = _dir("COWORKGYM_SCRATCH_DIR", "/work/scratch")
    previous_built = io.load(builder_dir)
    match stage:
        case "builder":
            previous = io.builder_from_json(previous_built) if previous_built else None
            builder: Builder = _llm_role(stage, spec, used) or ProceduralBuilder(_runtime())
            built = builder.build(request, previous)
            io.save(builder_dir, io.builder_to_json(built))
            return {"stage": stage, "ok": True, "faults": built.faults}
        case "verifier":
            if previous_built is None:
                raise RoleError("no Builder output to construct a verifier for", retryable=False)
            old = io.load(verifier_dir)
            previous_v = io.verifier_from_json(old) if old else None
            built = io.builder_from_json(previous_built)
            constructor: VerifierConstructor = (
                _llm_role(stage, spec, used) or ProceduralVerifierConstructor()
            )
            made = constructor.construct(request, built, previous_v)
            io.save(verifier_dir, io.verifier_to_json(made))
            return {"stage": stage, "ok": True, "faults": made.faults}
        case "detector":
            verifier = io.load(verifier_dir)
            if previous_built is None or verifier is None:
                raise RoleError("the detector needs both role outputs", retryable=False)
            pkg = assemble(io.builder_from_json(previous_built), io.verifier_from_json(verifier))
            io.clear(scratch_dir)
            on_disk = pkg.write(scratch_dir / "package")
            detector = IssueDetector(runtime=_runtime(), run_harbor_lint=False)
            reviewer = _llm_role(stage, spec, used, payload["name"])
            if reviewer is not None:  # backends.detector of kind llm: the review pass too
                from ..llm.review import ReviewingDetector

                detector = ReviewingDetector(reviewer, _runtime(), run_harbor_lint=False)
            report = detector.check(pkg, on_disk)
            return {
                "stage": stage,
                "ok": True,
                "digest": pkg.digest(),
                "defects": [_short(d) for d in report.defects[:MAX_DEFECTS]],
                "more_defects": max(0, len(report.defects) - MAX_DEFECTS),
            }
        case "release":
            from ..release import publisher_for

            package = EnvironmentPackage.load(scratch_dir / "package")
            target = spec.release.uri or os.environ.get("COWORKGYM_RELEASE_URI", "")
            if not target:
                raise RoleError("no release target: set spec.release.uri", retryable=False)
            record = {
                "name": payload["name"],
                "spec_digest": spec.digest(),
                "digest": package.digest(),
                "task": package.name,
            }
            uri = publisher_for(target).publish(payload["name"], package, record)
            return {"stage": stage, "ok": True, "uri": uri, "digest": package.digest()}
    raise RoleError(f"unknown stage {stage!r}", retryable=False)


def _short(defect: Defect) -> dict[str, str]:
    return {
        "code": defect.code,
        "owner": defect.owner,
        "severity": defect.severity,
        "message": defect.message[:160],
    }


def fit(result: dict[str, Any]) -> str:
    """The result as JSON that fits a termination message (defects dropped from the end)."""
    text = json.dumps(result, separators=(",", ":"))
    while len(text.encode()) > MAX_MESSAGE_BYTES and result.get("defects"):
        result["defects"].pop()
        result["more_defects"] = result.get("more_defects", 0) + 1
        text = json.dumps(result, separators=(",", ":"))
    return text


def main(argv: list[str]) -> int:
    stage = argv[0] if argv else ""
    log_path = Path(os.environ.get("COWORKGYM_TERMINATION_LOG", "/dev/termination-log"))
    used: list[Any] = []
    try:
        payload = json.loads(os.environ["COWORKGYM_STAGE_INPUT"])
        result = run_stage(stage, payload, used)
        code = 0
    except RoleError as exc:
        result, code = (
            {"stage": stage, "ok": False, "retryable": exc.retryable, "error": str(exc)[:1000]},
            1,
        )
    except Exception as exc:  # infrastructure or a bug: retried once by the loop
        traceback.print_exc()
        result, code = (
            {
                "stage": stage,
                "ok": False,
                "retryable": True,
                "error": f"{type(exc).__name__}: {exc}"[:1000],
            },
            1,
        )
    usage = usage_of(used)
    if usage is not None:
        result["usage"] = usage
    message = fit(result)
    print(message)
    with contextlib.suppress(OSError):  # outside a pod: no termination log; stdout has it
        log_path.write_text(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
