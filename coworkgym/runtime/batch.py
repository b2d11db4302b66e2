"""Score many workspaces of one Cowork package in a single sandboxed engine process.

Most of a Cowork verifier run is Python starting and importing the engine's libraries
(openpyxl, python-docx, jsonschema), not the checks. When a package's ``tests/test.sh`` is
the stock one, it does nothing but call the engine's entry point on one workspace, so
calling that same entry point once per workspace inside one process gives the same
outcomes for a fraction of the cost. That only holds while no check's result can depend
on where the workspace is mounted (``/cwg-batch/ws-N`` instead of the workdir): a spec with
``command`` checks (a test suite run in the agent's code, which may name the workdir) is
scored one run per workspace; a ``custom_script`` is given the workspace path as its
argument, so it may be batched unless its text names the workdir itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..package import templates
from ..package.package import TEST_SH, VERIFIER_SPEC, EnvironmentPackage

# Checks that start processes in the agent's code (its location may matter to them).
LOCATION_DEPENDENT_CHECKS = {"command"}
BATCH_ROOT = "/cwg-batch"

# Runs in the sandbox, on the distribution's Python: the engine's own CLI entry point per
# workspace; a crash leaves that workspace without a reward (invalid), like test.sh would.
# Every path arrives as an argument of its own: a sandbox without mount namespaces (the
# in-pod DirectSandbox) rewrites arguments that start with a mount target, not code.
DRIVER = """\
import json, sys, traceback
tests, pairs = sys.argv[1], sys.argv[2:]
sys.path.insert(0, tests)
from cowork_verifier.__main__ import main
for ws, out in zip(pairs[::2], pairs[1::2]):
    try:
        main(["--spec", tests + "/verifier.json", "--workspace", ws, "--out", out])
    except BaseException as exc:
        with open(out + "/details.json", "w") as f:
            json.dump({"status": "invalid", "error": f"engine crashed: {exc!r}"}, f)
        traceback.print_exc()
"""


def driver_argv(count: int) -> list[str]:
    """The batch command: tests dir, then each workspace and its logs dir, as mounted."""
    pairs = [p for i in range(count) for p in (f"{BATCH_ROOT}/ws-{i}", f"{BATCH_ROOT}/logs-{i}")]
    return ["python3", "-c", DRIVER, "/tests", *pairs]


def batchable(pkg: EnvironmentPackage, workdir: str) -> bool:
    """The package's verifier is the stock engine call, on checks that take the workspace
    from the engine rather than from where it is mounted."""
    if not pkg.is_cowork or pkg.files.get(TEST_SH) != templates.TEST_SH.encode():
        return False
    try:
        spec = json.loads(pkg.files[VERIFIER_SPEC])
    except (KeyError, ValueError):
        return False
    entries = [*spec.get("components", []), *spec.get("red_lines", [])]
    checks = [e.get("check", {}) for e in entries if isinstance(e, dict)]
    if any(c.get("type") in LOCATION_DEPENDENT_CHECKS for c in checks):
        return False
    scripts = [f"tests/{c.get('script', '')}" for c in checks if c.get("type") == "custom_script"]
    return not any(workdir.encode() in pkg.files.get(rel, workdir.encode()) for rel in scripts)


def batch_dirs(root: Path, count: int) -> list[tuple[Path, Path]]:
    """(workspace, logs) directory pairs under ``root``, mounted at BATCH_ROOT."""
    pairs = []
    for i in range(count):
        ws, logs = root / f"ws-{i}", root / f"logs-{i}"
        logs.mkdir(parents=True)
        pairs.append((ws, logs))
    return pairs
