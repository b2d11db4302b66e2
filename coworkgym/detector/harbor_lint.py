"""Run the real ``harbor lint`` when Harbor is installed (it is an optional extra)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .defects import Defect, DefectCode, Owner


def harbor_executable() -> str | None:
    beside = Path(sys.executable).parent / "harbor"
    return str(beside) if beside.exists() else shutil.which("harbor")


def harbor_lint(package_dir: Path) -> list[Defect] | None:
    """Findings as defects, or None when Harbor is not installed."""
    exe = harbor_executable()
    if exe is None:
        return None
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1"}
    done = subprocess.run(
        [exe, "lint", "--json", str(package_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if done.returncode not in (0, 1):
        return [
            Defect.of(
                DefectCode.HARBOR_LINT,
                f"harbor lint could not run (exit {done.returncode}): {done.stderr[-300:]}",
                severity="warning",
            )
        ]
    try:
        findings = json.loads(done.stdout or "[]")
    except ValueError:
        findings = [{"rule": "unparsed-output", "path": "", "message": done.stdout[-300:]}]
    defects = []
    for finding in findings:
        rel = str(finding.get("path", ""))
        verifier_side = "/tests/" in f"/{rel}" or finding.get("rule") == "shared-verifier"
        owner: Owner = "verifier" if verifier_side else "builder"
        defects.append(
            Defect.of(
                DefectCode.HARBOR_LINT,
                f"[{finding.get('rule')}] {finding.get('message')}",
                owner=owner,
                rule=finding.get("rule"),
                file=rel,
            )
        )
    return defects
