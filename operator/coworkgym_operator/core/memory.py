"""Giving the memory a burst of work freed back to the system.

A replica that takes up thousands of objects at once (a first start, a fail-over, a
campaign's creates) allocates and frees a great deal in a few seconds. glibc keeps what was
freed in its heaps for reuse, so the process kept the burst's high-water mark for good:
about 385 KiB per environment after taking up 2,000, where the same replica restarted on
them settles at about 60 KiB (benchmarks/operator_memory.py). Asking the allocator now and
then to hand the free pages back (``malloc_trim``) brings the taken-up replica to about
75 KiB. Capping glibc's arenas or mapping large blocks on their own (MALLOC_ARENA_MAX,
MALLOC_MMAP_THRESHOLD_) did less, and nothing more beside the trim.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger("coworkgym_operator")


def _glibc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


_TRIM = _glibc_trim()


def trim() -> bool:
    """Hand the heaps' free pages back to the system; False where it cannot."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


async def trim_while_working(interval: float, work_done: Callable[[], float]) -> None:
    """Every ``interval`` seconds, trim if ``work_done`` (a count that grows with the
    operator's work) moved since the last look: an idle replica costs nothing."""
    if _TRIM is None:
        log.info("no malloc_trim in this C library: freed memory stays with the allocator")
        return
    seen = work_done()
    while True:
        await asyncio.sleep(interval)
        now = work_done()
        if now != seen:
            seen = now
            await asyncio.to_thread(trim)
