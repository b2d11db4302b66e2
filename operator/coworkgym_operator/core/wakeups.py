"""One deadline queue for the whole operator: "look at this object again at time t".

An object changes on events (its spec, its children's Jobs, pods and objects), which its
controller is handed as they happen; only a few things change with the clock alone: a pod
that has not started by the end of its grace period, a reconcile to retry after an error,
work in flight (looked at again until it settles), a running trainer's progress. A kopf
timer per object polled for all of them, every few seconds, whether or not anything could
have changed: at 1,000 idle environments that was 0.28 cores. Here each object has
at most one pending wake-up, the earliest asked for, on the event loop's own timer heap
(``loop.call_at``): nothing runs for an object until its time comes.

Reconciles run in worker threads, so ``at`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

Key = tuple[str, ...]  # (kind, namespace, name, uid): core/controller.py
Wake = Callable[[Key], Awaitable[Any]]


class Wakeups:
    """At most one pending wake-up per key: the earliest asked for. ``start`` binds the
    queue to the running event loop and the coroutine each wake-up runs."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: Wake | None = None
        self._due: dict[Key, tuple[float, asyncio.TimerHandle | None]] = {}
        self._lock = threading.Lock()
        self._running: set[asyncio.Task[Any]] = set()  # held, so the tasks are not collected

    def start(self, wake: Wake) -> None:
        """From the event loop's thread (a kopf startup handler)."""
        self._loop, self._wake = asyncio.get_running_loop(), wake

    def stop(self) -> None:
        with self._lock:
            for _when, handle in self._due.values():
                if handle is not None:
                    handle.cancel()
            self._due.clear()
        self._loop = self._wake = None

    def at(self, key: Key, delay: float) -> None:
        """Wake ``key`` in ``delay`` seconds, unless it is due sooner already."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # not started (a test without kopf), or stopped
        when = time.monotonic() + max(delay, 0.0)
        with self._lock:
            due = self._due.get(key)
            if due is not None and due[0] <= when:
                return
            # the later one's handle stays, for _arm to cancel
            self._due[key] = (when, due[1] if due is not None else None)
        loop.call_soon_threadsafe(self._arm, key, when)

    def cancel(self, key: Key) -> None:
        with self._lock:
            due = self._due.pop(key, None)
        if due is not None and due[1] is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(due[1].cancel)

    def pending(self) -> int:
        with self._lock:
            return len(self._due)

    def _arm(self, key: Key, when: float) -> None:  # on the loop
        assert self._loop is not None
        with self._lock:
            due = self._due.get(key)
            if due is None or due[0] != when:
                return  # cancelled, or superseded by a sooner one (armed by its own call)
            if due[1] is not None:
                due[1].cancel()
            # loop.time() and time.monotonic() are the same clock on Linux, but not by
            # contract: convert through the delay left
            handle = self._loop.call_later(max(when - time.monotonic(), 0.0), self._fire, key, when)
            self._due[key] = (when, handle)

    def _fire(self, key: Key, when: float) -> None:  # on the loop
        with self._lock:
            due = self._due.get(key)
            if due is None or due[0] != when:
                return
            del self._due[key]
        if self._wake is None:
            return
        task = asyncio.ensure_future(self._wake(key))
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a wake-up failed", exc_info=task.exception())


__all__ = ["Key", "Wakeups"]
