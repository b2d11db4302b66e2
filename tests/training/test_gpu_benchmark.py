"""benchmarks/gpu_training.py keeps working: its CPU smoke run (a 2-layer model) prints a
tokens/s figure for an SFT and a GRPO step. The real run needs an accelerator machine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_training.py"


def test_the_gpu_benchmark_runs_tiny_on_cpu(tmp_path: Path) -> None:
    rows = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--steps", "1",
         "--warmup", "1", "--peak-tflops", "1", "--json", str(rows)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if " on cpu: " in line]
    assert [line.split()[0] for line in lines] == ["sft", "grpo"]
    for line in lines:
        tokens = re.search(r"([\d,]+) tokens/s", line)
        assert tokens is not None and int(tokens.group(1).replace(",", "")) > 0
        assert re.search(r"MFU \d+\.\d+%", line)
    assert rows.is_file()
