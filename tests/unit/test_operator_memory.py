"""The operator hands freed memory back: malloc_trim releases the free pages a burst left in
the middle of the heap, and the trimming task runs only while the operator works."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coworkgym_operator.core import memory

pytestmark = pytest.mark.skipif(memory._TRIM is None, reason="no glibc malloc_trim here")


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_trim_gives_back_the_pages_a_burst_freed_mid_heap() -> None:
    # 2 KiB blocks come from glibc's heap (not pymalloc, not mmap); keeping every 64th
    # alive pins the heap's top, so glibc's own trimming at free() cannot shrink it
    burst = [bytes(2048) for _ in range(100_000)]
    kept = burst[::64]
    del burst
    before = rss_mib()
    assert memory.trim()
    after = rss_mib()
    assert before - after > 100, f"RSS {before:.0f} → {after:.0f} MiB"
    assert len(kept) == 1563


def test_the_trimming_task_trims_only_when_work_was_done(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", trims.append)
    counts = [0, 0, 1, 1, 1, 5]  # the reconciles at the start, then at each look
    looks: list[float] = []

    def work_done() -> float:
        looks.append(counts[min(len(looks), len(counts) - 1)])
        return looks[-1]

    async def run() -> None:
        task = asyncio.create_task(memory.trim_while_working(0.01, work_done))
        while len(looks) < 12:  # idle after the last count moved: many looks, no trim
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(run(), 5))
    assert trims == [0, 0], f"trimmed {len(trims)} times over the counts {looks}"
