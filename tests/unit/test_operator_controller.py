"""The event-driven toolkit every kind's controller is (core/controller.py): what a
reconcile leaves, the settled cache that answers an event without an API call, creates not
yet delivered by the watches, and a failed event-run reconcile retried with backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from typing import Any

import kopf

from coworkgym_operator.core.controller import Controller, Done, Look, done
from coworkgym_operator.core.settings import SETTINGS
from coworkgym_operator.core.watches import Indices, Watches

NS, NAME, UID = "team", "demo", "uid-1"
JOB = {"kind": "Job", "metadata": {"name": "demo-fetch"}}


def obj(version: str = "7", status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {"namespace": NS, "name": NAME, "uid": UID, "resourceVersion": version}
    return {"metadata": meta, "spec": {}, "status": status or {}}


class Kind:
    """A kind whose reconcile returns what the test says and whose look reads ``seen``."""

    def __init__(self) -> None:
        self.seen, self.wait = "a", None
        self.reconciles = 0
        self.read_status: list[Any] = []
        self.current: dict[str, Any] | None = obj()
        self.controller = Controller(
            "Widget", "widgets", Watches(), self.once, self.look, finished=lambda s: False
        )
        self.controller.read = lambda namespace, name: self.current
        self.next: Done = Done(True, hint="h", look=Look("a"))

    def once(self, current: Any, body: Any, logger: Any, indices: Indices | None) -> Done:
        self.reconciles += 1
        self.read_status.append(current["status"])
        return self.next

    def look(self, namespace: str, name: str, uid: str, hint: Hashable, i: Indices) -> Look:
        assert hint == "h"
        return Look(self.seen, self.wait)


def body() -> kopf.Body:
    return kopf.Body({"metadata": {"namespace": NS, "name": NAME, "uid": UID}})


LOG = logging.getLogger("test")


def test_done_is_idle_only_when_nothing_was_made_deleted_or_written() -> None:
    assert done({"a": 1}, {"a": 1}, []).idle
    assert not done({"a": 1}, {"a": 2}, []).idle
    assert not done({}, {}, [JOB]).idle
    assert not done({}, {}, [], [("Job", "x")]).idle
    assert not done({}, {}, [], busy=True).idle
    made = done({}, {}, [JOB], [("Job", "old")])
    assert dict(made.created) == {"Job/demo-fetch": None} and list(made.deleted) == ["Job/old"]


def test_a_settled_object_is_answered_from_the_indices_until_what_it_reads_changes() -> None:
    kind = Kind()
    c = kind.controller
    c.reconcile(body(), LOG, Indices())
    assert kind.reconciles == 1
    assert c.unchanged(UID, NS, NAME, Indices(), None)  # an event: nothing it reads moved
    assert c.unchanged(UID, NS, NAME, Indices(), "7")  # the resync: the same version
    assert not c.unchanged(UID, NS, NAME, Indices(), "8")  # the object changed
    kind.seen = "b"
    assert not c.unchanged(UID, NS, NAME, Indices(), None)  # a child changed
    kind.seen, kind.wait = "a", SETTINGS.reconcile_interval / 2
    assert not c.unchanged(UID, NS, NAME, Indices(), None)  # the clock is due


def test_work_in_flight_is_never_settled_nor_one_reconciled_without_indices() -> None:
    kind = Kind()
    c = kind.controller
    kind.next = done({}, {"phase": "Running"}, [], hint="h", look=Look("a"))
    c.reconcile(body(), LOG, Indices())
    assert not c.unchanged(UID, NS, NAME, Indices(), None)
    kind.next = Done(True, hint="h", look=Look("a"))
    c.reconcile(body(), LOG, None)  # no watches: asked the API, nothing to compare with
    assert not c.unchanged(UID, NS, NAME, Indices(), None)


def test_a_create_reads_as_there_until_the_watch_delivers_it() -> None:
    kind = Kind()
    c = kind.controller
    kind.next = done({}, {}, [JOB], hint="h", look=Look("a"))
    c.reconcile(body(), LOG, Indices())
    assert c.undelivered(UID, frozenset()) == {"Job/demo-fetch": None}
    assert c.undelivered(UID, {"Job/demo-fetch"}) == {}  # delivered: the index says
    c.delivered(UID, ["Job/demo-fetch"])
    assert c.undelivered(UID, frozenset()) == {}
    c.forget(NS, NAME, UID)


def test_the_first_reconcile_of_a_delivered_object_reads_no_api_and_later_ones_do() -> None:
    kind = Kind()
    gets: list[str] = []
    kind.current = obj(status={"phase": "Building"})  # what a GET would answer

    def get(namespace: str, name: str) -> dict[str, Any] | None:
        gets.append(name)
        return kind.current

    kind.controller.read = get
    delivered = kopf.Body(obj(status={"phase": "Pending"}))
    asyncio.run(kind.controller.changed(delivered, LOG))  # a create: the watch's body
    assert gets == [] and kind.read_status == [{"phase": "Pending"}]
    # its own status write may be newer than any body delivered before it: read afresh
    asyncio.run(kind.controller.changed(delivered, LOG))
    kind.controller.reconcile(body(), LOG, Indices())  # a child's event or a wake-up
    assert gets == [NAME, NAME] and kind.read_status[1:] == [{"phase": "Building"}] * 2


def test_a_gone_or_going_object_is_not_reconciled() -> None:
    kind = Kind()
    kind.current = None
    kind.controller.reconcile(body(), LOG, Indices())
    kind.current = {**obj(), "metadata": {**obj()["metadata"], "deletionTimestamp": "now"}}
    kind.controller.reconcile(body(), LOG, Indices())
    assert kind.reconciles == 0


def test_an_event_run_reconcile_that_raises_is_retried_with_backoff() -> None:
    kind = Kind()

    def fails(*_: Any) -> Done:
        raise RuntimeError("API server away")

    kind.controller.once = fails
    asked: list[float] = []
    kind.controller.wake_in = lambda key, delay: asked.append(delay)

    async def nudges() -> None:
        for _ in range(3):
            await kind.controller.nudge((NS, NAME, UID), LOG, Indices(), "job")

    asyncio.run(nudges())
    first = SETTINGS.reconcile_interval
    assert asked == [first, 2 * first, 4 * first]
    kind.controller.once = kind.once
    asyncio.run(kind.controller.nudge((NS, NAME, UID), LOG, Indices(), "job"))
    assert kind.reconciles == 1 and not kind.controller._failures
