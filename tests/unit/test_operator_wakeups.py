"""The operator's deadline queue: one pending wake-up per object, the earliest asked for,
asked for from any thread, run on the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

from coworkgym_operator.core.wakeups import Key, Wakeups

A: Key = ("ns", "a", "uid-a")
B: Key = ("ns", "b", "uid-b")


def run(body: object) -> None:
    asyncio.run(body)  # type: ignore[arg-type]


def test_each_key_wakes_once_at_the_earliest_time_asked_for() -> None:
    woken: list[tuple[Key, float]] = []

    async def main() -> None:
        queue = Wakeups()
        start = time.monotonic()

        async def wake(key: Key) -> None:
            woken.append((key, time.monotonic() - start))

        queue.start(wake)
        queue.at(A, 0.5)
        queue.at(A, 0.1)  # sooner: wins
        queue.at(A, 0.3)  # later than the pending one: ignored
        queue.at(B, 0.2)
        assert queue.pending() == 2
        await asyncio.sleep(0.8)
        assert queue.pending() == 0
        queue.stop()

    run(main())
    assert [k for k, _ in woken] == [A, B]
    assert 0.1 <= woken[0][1] < 0.3 and 0.2 <= woken[1][1] < 0.45


def test_a_wake_up_asked_for_from_a_worker_thread_runs_on_the_loop() -> None:
    seen: list[int] = []

    async def main() -> None:
        queue = Wakeups()
        loop_thread = threading.get_ident()

        async def wake(_key: Key) -> None:
            seen.append(threading.get_ident())
            assert threading.get_ident() == loop_thread

        queue.start(wake)
        await asyncio.to_thread(queue.at, A, 0.05)
        await asyncio.sleep(0.3)
        queue.stop()

    run(main())
    assert len(seen) == 1


def test_cancelled_and_stopped_wake_ups_do_not_run() -> None:
    woken: list[Key] = []

    async def main() -> None:
        queue = Wakeups()

        async def wake(key: Key) -> None:
            woken.append(key)

        queue.start(wake)
        queue.at(A, 0.1)
        queue.at(B, 0.1)
        await asyncio.sleep(0)  # let the loop arm them
        queue.cancel(A)
        await asyncio.sleep(0.3)
        queue.at(A, 0.1)
        queue.stop()
        await asyncio.sleep(0.3)
        queue.at(A, 0.0)  # stopped: not queued
        assert queue.pending() == 0

    run(main())
    assert woken == [B]


def test_a_failing_wake_up_is_logged_and_the_queue_goes_on(caplog: object) -> None:
    woken: list[Key] = []

    async def main() -> None:
        queue = Wakeups()

        async def wake(key: Key) -> None:
            woken.append(key)
            if key == A:
                raise RuntimeError("boom")

        queue.start(wake)
        queue.at(A, 0.05)
        queue.at(B, 0.1)
        await asyncio.sleep(0.4)
        queue.stop()

    run(main())
    assert woken == [A, B]
    assert "a wake-up failed" in caplog.text  # type: ignore[attr-defined]
