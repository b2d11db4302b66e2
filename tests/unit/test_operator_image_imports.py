"""The operator image installs the `operator` extra only (sandbox-images/operator/Dockerfile).

A core module that imports an LLM client, a harness or a trainer at the top level makes the
operator pod crash at start, which no in-process test sees (the dev venv has every extra).
So the operator's modules are imported here in a fresh interpreter where every package
outside the core dependencies and the `operator` extra fails to import.
"""

from __future__ import annotations

import subprocess
import sys

# Distributions the operator image does not install (pyproject's other extras).
NOT_IN_OPERATOR_IMAGE = [
    "openai",
    "httpx",
    "minisweagent",
    "agents",
    "litellm",
    "pyarrow",
    "datasets",
    "matplotlib",
    "harbor",
    "torch",
    "transformers",
    "ray",
    "coworkgym_training",
]

PROBE = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not in the operator image")
        return None
sys.meta_path.insert(0, Block())
import coworkgym_operator.controllers
import coworkgym_operator.__main__
print("ok")
"""


def test_the_operator_imports_with_only_its_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(NOT_IN_OPERATOR_IMAGE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_probe_catches_a_blocked_import() -> None:
    # The same probe fails when a module it imports needs a blocked package.
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("print", "import coworkgym.rollout.user; print"),
         ",".join(NOT_IN_OPERATOR_IMAGE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "openai is not in the operator image" in done.stderr
