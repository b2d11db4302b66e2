"""The event-driven controller every kind is: one idempotent reconcile per object, run on
create, spec change and resume, on the events of the object's children (``Controller.
on_child``), and at the deadlines the clock sets (a pod's start grace, a retry after an
error, work in flight: the shared queue, core/wakeups.py); one resync sweep, the only
timer, looks again now and then at each unfinished object that changed since its last
reconcile, in case an event was missed.

Each reconcile reads the object afresh (the first in this process: the object the watch
delivered) and writes its whole status once, in turn with the object's other reconciles
(core/turns.py). A kind hands the controller:

- ``once``: one reconcile of a fresh copy (metadata, spec and status; counted, and its
  errors, by kind), returning ``Done``: whether it had nothing to do
  (``idle``), what of the object decides what it observes (``hint``) and what it observed
  and when the clock alone may change its plan (``Look``);
- ``look`` (optional): the same ``Look`` from the indices, without an API call, for a hint.
  Where a kind has one, an event or a wake-up that finds the object settled (its last
  reconcile had nothing to do, and nothing it reads has changed since) is decided on the
  event loop and costs no thread hop and no API call: the settled cache.

Children are created before the watches deliver them: ``undelivered`` says which, so a
reconcile right after a create does not create (or miss) them again.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf

from coworkgym_operator.core import metrics, shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.kube import CustomObjects, kube
from coworkgym_operator.core.settings import SETTINGS
from coworkgym_operator.core.turns import Manifest, Turns, counted, fresh
from coworkgym_operator.core.wakeups import Wakeups
from coworkgym_operator.core.watches import Indices, Resource, Watches

Key = tuple[str, str, str]  # (namespace, name, uid)
# an event-run reconcile that raised runs again after the reconcile interval, doubling on
# each failure in a row up to this (an API server back after an outage is noticed soon)
RETRY_MAX_SECONDS = 30.0
log = logging.getLogger("coworkgym_operator")

# when to look at an object again without an event: one queue for every kind, keyed
# (kind, namespace, name, uid)
WAKEUPS = Wakeups()
metrics.WAKEUPS_PENDING.set_function(WAKEUPS.pending)
_CONTROLLERS: dict[str, Controller] = {}
# the ids of the event handlers that run on every event of a child: kopf's "succeeded"
# line for them is dropped (core/quiet.py)
QUIET_HANDLERS: set[str] = set()


@dataclass(frozen=True)
class Look:
    """What a reconcile read of the object's children (compared by the next event), and in
    how many seconds time alone may change its plan (None: only an event can)."""

    seen: str = ""
    wait: float | None = None


@dataclass(frozen=True)
class Done:
    """What one reconcile leaves: ``idle`` when it created, deleted and wrote nothing."""

    idle: bool
    hint: Hashable = None
    look: Look = field(default_factory=Look)
    # "Kind/name" made by this reconcile, each with what the kind reads of it until the
    # watch delivers it (None: only that it exists)
    created: Mapping[str, Any] = field(default_factory=dict)
    deleted: Iterable[str] = ()
    transition: bool = False  # a phase change written (coworkgym_transitions)


def done(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    create: Sequence[Manifest],
    delete: Sequence[tuple[str, str]] = (),
    *,
    look: Look | None = None,
    hint: Hashable = None,
    busy: bool = False,
    made: Mapping[str, Any] | None = None,
    transition: tuple[str, str] | None = None,
) -> Done:
    """What a reconcile that turned status ``before`` into ``after``, created ``create`` and
    deleted ``delete`` (kind, name) leaves; ``busy``: it did something else (deleted pods,
    probed endpoints); ``made``: what the kind keeps of each created child (default: that
    it exists)."""
    return Done(
        not (create or delete or busy) and after == before,
        hint=hint,
        look=look or Look(),
        created=made if made is not None else dict.fromkeys(child_key(c) for c in create),
        deleted=[f"{kind}/{name}" for kind, name in delete],
        transition=transition is not None,
    )


def child_key(manifest: Manifest) -> str:
    """ "Kind/name" of a manifest, as the indices by owner hold it."""
    return f"{manifest['kind']}/{manifest['metadata']['name']}"


Once = Callable[[Manifest, kopf.Body, kopf.Logger, Indices | None], Done]
LookFn = Callable[[str, str, str, Hashable, Indices], Look]
Owner = Callable[[kopf.Body, str, Mapping[str, str], Indices], Iterable[Key]]


class Controller:
    """The machinery of one kind: turns, the settled cache, nudges with backoff, wake-ups
    and the resync sweep over an index of its unfinished objects."""

    def __init__(
        self,
        kind: str,
        plural: str,
        watches: Watches,
        once: Once,
        look: LookFn | None = None,
        *,
        finished: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        """``finished``: of a status, whether the object is done (default: its Complete
        condition is True). ``register`` hands its handlers to kopf."""
        self.kind, self.plural, self.watches, self.once = kind, plural, watches, once
        self.finished = finished or condition_true("Complete")
        self.look = look
        self._objects: CustomObjects | None = None
        self.turns = Turns()
        # uid → (resourceVersion, hint, seen) of the last reconcile that had nothing to do
        self._settled: dict[str, tuple[str, Hashable, str]] = {}
        # what this process created, per uid, until the watches deliver it
        self._created: defaultdict[str, dict[str, Any]] = defaultdict(dict)
        # the uids reconciled by this process: their next reconcile reads them afresh
        self._reconciled: set[str] = set()
        # uid → reconciles in a row that raised outside kopf's own retries
        self._failures: defaultdict[str, int] = defaultdict(int)
        self._indices: Indices | None = None
        self._sweep: asyncio.Task[None] | None = None
        self._versions: Any = None  # kopf's index of unfinished objects, once started
        self._versions_id = ""
        self.log = logging.getLogger(f"coworkgym_operator.{plural}")
        _CONTROLLERS[kind] = self

    # ---- kopf registration ---------------------------------------------------------------
    def register(self, change_id: str, versions_id: str) -> None:
        """The object's own handlers: reconcile on create, spec change and resume; the index
        of unfinished objects the resync sweeps; start and stop with the operator."""
        resource = (GROUP, VERSION, self.plural)
        for on in (kopf.on.resume, kopf.on.create):
            on(*resource, id=change_id)(self.changed)
        kopf.on.update(*resource, id=change_id, field="spec")(self.changed)
        kopf.index(*resource, id=versions_id)(self._version)
        kopf.on.startup(id=f"start_{versions_id}")(self._start)
        kopf.on.cleanup(id=f"stop_{versions_id}")(self._stop)
        self._versions_id = versions_id

    def on_child(
        self,
        resource: Resource,
        labels: Mapping[str, Any] | None,
        owner: Owner,
        id: str,
        source: str,
    ) -> None:
        """Reconcile the owners (``owner`` finds them from the child) on each event of a child:
        async, deciding on the event loop, so the many events that change nothing a
        reconcile reads (a pod's scheduler retries, a Job's counters) cost no thread hop and
        no API call, and none queue behind a stop."""

        async def on_event(
            body: kopf.Body,
            namespace: str | None,
            labels: Mapping[str, str],
            logger: kopf.Logger,
            **kwargs: Any,
        ) -> None:
            indices = self.watches.of(kwargs)
            if indices is None:
                return
            for key in owner(body, str(namespace), labels, indices):
                await self.nudge(key, logger, indices, source)

        kopf.on.event(*resource, id=id, labels=labels, when=_not_stopping)(on_event)
        QUIET_HANDLERS.add(id)

    def controlled_by(self, label: str) -> Owner:
        """The owner of a child that names it in ``label`` and lists it as its controller."""

        def owner(body: kopf.Body, namespace: str, labels: Mapping[str, str], _: Indices) -> Any:
            for ref in body.metadata.get("ownerReferences") or []:
                if ref.get("kind") == self.kind and ref.get("controller") and labels.get(label):
                    return [(namespace, str(labels[label]), str(ref.get("uid")))]
            return []

        return owner

    def job_pod_of(self, label: str) -> Owner:
        """The owner of a Job's pod: the Job's controller, from the Job's index (the Job's
        watch has not delivered it yet: its own event will)."""

        def owner(_: kopf.Body, namespace: str, labels: Mapping[str, str], indices: Indices) -> Any:
            uid = indices.owner(namespace, str(labels.get("job-name", "")))
            return [] if uid is None or not labels.get(label) else [(namespace, labels[label], uid)]

        return owner

    def named_by(self, label: str) -> Owner:
        """The owner of a child that names it in ``label`` (no owner reference to go by: a
        Deployment's pods, a batch made for a round), while the owner is unfinished: its
        uid from the index the resync sweeps."""

        def owner(_: kopf.Body, namespace: str, labels: Mapping[str, str], __: Indices) -> Any:
            return self.unfinished(namespace, labels.get(label))

        return owner

    def unfinished(self, namespace: str, name: str | None) -> list[Key]:
        """The unfinished object of that name (none: finished, gone, or not indexed yet)."""
        if not name or self._versions is None:
            return []
        return [(namespace, name, uid) for uid, _ in self._versions.get((namespace, name), ())]

    # ---- reconcile -----------------------------------------------------------------------
    async def changed(self, body: kopf.Body, logger: kopf.Logger, **kwargs: Any) -> None:
        # async, so that a run queued while the operator stops costs no hop through a thread
        if not shutdown.stopping():
            indices = self.watches.of(kwargs)
            await asyncio.to_thread(self.reconcile, body, logger, indices, delivered=True)

    def reconcile(
        self,
        body: kopf.Body,
        logger: kopf.Logger,
        indices: Indices | None,
        *,
        delivered: bool = False,
    ) -> None:
        """In the object's turn, on a fresh read (gone, or going: its delete handler sees to
        it): reconcile, then remember whether it settled and when to look again.
        ``delivered``: ``body`` is the whole object as the watch delivered it (a create, a
        spec change, a resume), not a key. Until this process has reconciled the object,
        nothing newer than that can be of its making, so that body is read instead of the
        object: a burst of creates, or a restart over every object, costs no GET each."""
        if indices is not None:
            self._indices = indices
        uid = str(body.metadata.uid)

        def read(namespace: str, name: str) -> Manifest | None:
            if delivered and uid not in self._reconciled:
                return copy.deepcopy(dict(body))
            return self.read(namespace, name)

        def once(current: Manifest, body: kopf.Body, logger: kopf.Logger) -> None:
            obj, namespace, _ = fresh(current)
            self._reconciled.add(uid)  # whatever it writes, the next one reads afresh
            with counted(namespace, self.kind):  # an error counted, and raised again
                outcome = self.once(obj, body, logger, indices)
            if outcome.transition:
                metrics.TRANSITIONS.labels(namespace, self.kind).inc()
            self._settle(obj, outcome, indices)

        self.turns.reconcile(body, logger, read, once)

    def _settle(self, current: Manifest, done: Done, indices: Indices | None) -> None:
        meta = current["metadata"]
        uid = str(meta.get("uid"))
        made = self._created[uid]
        made.update(done.created)
        for child in done.deleted:
            made.pop(child, None)
        if done.idle and indices is not None and self.look is not None:
            self._settled[uid] = (str(meta.get("resourceVersion")), done.hint, done.look.seen)
        else:
            self._settled.pop(uid, None)
        # Work in flight (a child made or going, a status written) is looked at again every
        # reconcile interval until a reconcile finds nothing to do: some of what follows it
        # sends no event here (a claim finally gone). A settled one waits for events, and
        # for the clock where the clock alone may change the plan.
        wait = done.look.wait if done.idle else SETTINGS.reconcile_interval
        if wait is not None:
            self.wake_in((str(meta["namespace"]), str(meta["name"]), uid), wait)

    def read(self, namespace: str, name: str) -> Manifest | None:
        """The object as it is now (a GET, on the operator's one client; None: gone)."""
        if self._objects is None:
            self._objects = CustomObjects(kube().api, self.plural)
        return self._objects.read(namespace, name)

    def wake_in(self, key: Key, delay: float) -> None:
        WAKEUPS.at((self.kind, *key), delay)

    def undelivered(self, uid: str, delivered: Iterable[str]) -> dict[str, Any]:
        """What this process created for ``uid`` that the watches have not delivered, with
        what the kind keeps of each (a copy: worker threads update the map)."""
        made = dict(self._created.get(uid, {}))
        for child in delivered:
            made.pop(child, None)
        return made

    def delivered(self, uid: str, children: Iterable[str]) -> None:
        """From now on the index is the truth for these (pruned in the object's turn, not
        on the event loop, which only reads a copy)."""
        made = self._created.get(uid)
        for child in children if made else ():
            made.pop(child, None)  # type: ignore[union-attr]

    def unchanged(
        self, uid: str, namespace: str, name: str, indices: Indices, version: str | None
    ) -> bool:
        """Whether the last reconcile had nothing to do and nothing it reads has changed since
        (``version``: the object's resourceVersion, where the caller has the object). If so
        and the clock is still to come, its wake-up is asked for again: the queue keeps one
        per object, the soonest, and this may be it, spent here without a reconcile."""
        known = self._settled.get(uid)
        if known is None or self.look is None or (version is not None and known[0] != version):
            return False
        look = self.look(namespace, name, uid, known[1], indices)
        if look.seen != known[2] or (
            look.wait is not None and look.wait <= SETTINGS.reconcile_interval
        ):
            return False
        if look.wait is not None:
            self.wake_in((namespace, name, uid), look.wait)
        return True

    async def nudge(self, key: Key, logger: Any, indices: Indices, source: str) -> None:
        """Something the object's reconcile reads may have changed (an event, a deadline):
        reconcile it, unless nothing it reads did. A reconcile that raises is retried here
        with backoff, as kopf retries its own handlers'."""
        namespace, name, uid = key
        if shutdown.stopping():
            return
        if self.unchanged(uid, namespace, name, indices, None):
            metrics.NUDGES.labels(self.kind, source, "unchanged").inc()
            return
        metrics.NUDGES.labels(self.kind, source, "reconciled").inc()
        meta = {"namespace": namespace, "name": name, "uid": uid}
        raw: Any = {"apiVersion": f"{GROUP}/{VERSION}", "kind": self.kind, "metadata": meta}
        try:
            await asyncio.to_thread(self.reconcile, kopf.Body(raw), logger, indices)
        except Exception as exc:  # any failure: retried, and logged
            self._failures[uid] += 1
            delay = SETTINGS.reconcile_interval * 2.0 ** (self._failures[uid] - 1)
            delay = min(delay, RETRY_MAX_SECONDS)
            logger.warning(f"reconcile of {name} failed ({exc}); again in {delay:g} s")
            self.wake_in(key, delay)
        else:
            self._failures.pop(uid, None)

    async def wake(self, key: Key) -> None:
        if self._indices is not None:
            logger = logging.LoggerAdapter(self.log, {"object": f"{key[0]}/{key[1]}"})
            await self.nudge(key, logger, self._indices, "wakeup")

    def forget(self, namespace: str, name: str, uid: str) -> None:
        """A deleted object: nothing of it is kept."""
        self.turns.forget(uid)
        self._created.pop(uid, None)
        self._settled.pop(uid, None)
        self._failures.pop(uid, None)
        self._reconciled.discard(uid)
        WAKEUPS.cancel((self.kind, namespace, name, uid))

    # ---- the resync sweep ----------------------------------------------------------------
    def _version(
        self, namespace: str | None, name: str, uid: str | None, meta: Any, status: Any, **_: Any
    ) -> dict[tuple[str, str], tuple[str, str]]:
        """Every unfinished object's uid and resourceVersion: what the resync sweeps. A tuple
        per object, where a kopf timer per object held a task, its stopper and its log
        adapter."""
        if self.finished(status or {}):
            return {}
        return {(str(namespace), name): (str(uid), str(meta.get("resourceVersion")))}

    async def _start(self, **kwargs: Any) -> None:
        WAKEUPS.start(_wake)  # on kopf's event loop (every kind's start: the same)
        self._indices = self.watches.of(kwargs)
        versions = self._versions = kwargs.get(self._versions_id)
        if versions is not None:  # kopf's index is live: the sweep reads it as it grows
            self._sweep = asyncio.create_task(self._resync(versions))

    async def _stop(self, **_: Any) -> None:
        # the next operator in this process (tests run several) has a loop of its own
        WAKEUPS.stop()
        self._indices = self._versions = None
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    async def _resync(self, versions: Any) -> None:
        """Every resync interval, look again at each unfinished object that changed since
        its last reconcile had nothing to do (decided from the indices: for a settled one,
        no API call), in case an event was missed."""
        while True:
            await asyncio.sleep(SETTINGS.resync_interval)
            indices = self._indices
            if indices is None or shutdown.stopping():
                continue
            for (namespace, name), entries in list(versions.items()):
                for uid, version in list(entries):
                    if not self.unchanged(uid, namespace, name, indices, version):
                        self._settled.pop(uid, None)  # the wake-up's reconcile must run
                        self.wake_in((namespace, name, uid), 0.0)


async def _wake(key: tuple[str, ...]) -> None:
    kind, namespace, name, uid = key
    controller = _CONTROLLERS.get(kind)
    if controller is not None:
        await controller.wake((namespace, name, uid))


def _not_stopping(**_: Any) -> bool:
    return not shutdown.stopping()


def condition_true(kind: str) -> Callable[[Mapping[str, Any]], bool]:
    """``finished`` for a kind whose end is a condition (e.g. Complete) being True."""

    def finished(status: Mapping[str, Any]) -> bool:
        return any(
            c.get("type") == kind and c.get("status") == "True"
            for c in status.get("conditions") or []
        )

    return finished


__all__ = [
    "QUIET_HANDLERS",
    "WAKEUPS",
    "Controller",
    "Done",
    "Look",
    "child_key",
    "condition_true",
    "done",
]
