"""What every controller does around its kind's reconcile.

An object's reconcile runs from its kopf handlers, from its children's events and from
its wake-ups (core/controller.py), each with the body it was handed, which may predate the
status another run just wrote: reconciling such a copy would
redo (and announce, and count) a step already taken. So the reconciles of one object take
turns (a lock per object), each reads the object afresh, and each writes the status itself
before its turn ends (kopf's patch would land only after the handler returns)."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import kopf

from coworkgym_operator.core import metrics, shutdown

Manifest = dict[str, Any]


class Writer(Protocol):
    def delete(self, namespace: str, kind: str, name: str) -> bool: ...
    def create(self, manifest: Manifest) -> bool: ...
    def write_status(
        self, namespace: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None: ...


class Turns:
    """One lock per object (by uid), so that an object's reconciles take turns."""

    def __init__(self) -> None:
        self._turns: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._lock = threading.Lock()

    def of(self, uid: str) -> threading.Lock:
        with self._lock:
            return self._turns[uid]

    def forget(self, uid: str) -> None:
        with self._lock:
            self._turns.pop(uid, None)

    def reconcile(
        self,
        body: kopf.Body,
        logger: kopf.Logger,
        read: Callable[[str, str], Manifest | None],
        once: Callable[[Manifest, kopf.Body, kopf.Logger], None],
    ) -> None:
        """In the object's turn: read it afresh and, unless it is gone or going (its delete
        handler sees to that), hand the fresh copy to ``once``. Nothing while the operator
        stops (shutdown.py)."""
        if shutdown.stopping():  # queued before the stop: the next operator redoes it
            return
        namespace, name = str(body.metadata.namespace), str(body.metadata.name)
        with self.of(str(body.metadata.uid)):
            current = read(namespace, name)
            if current is None or current["metadata"].get("deletionTimestamp"):
                return
            once(current, body, logger)


def fresh(current: Manifest) -> tuple[Manifest, str, str]:
    """The object as the reconcile reads it (metadata, spec and status, never None), with
    its namespace and name."""
    obj = {
        "metadata": current["metadata"],
        "spec": current.get("spec") or {},
        "status": current.get("status") or {},
    }
    return obj, str(obj["metadata"]["namespace"]), str(obj["metadata"]["name"])


def where(obj: Manifest) -> tuple[str, str]:
    """An object's namespace and name."""
    return str(obj["metadata"]["namespace"]), str(obj["metadata"]["name"])


def carry_out(
    client: Writer,
    logger: kopf.Logger,
    namespace: str,
    name: str,
    delete: Iterable[tuple[str, str]],
    create: Iterable[Manifest],
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    """Create the plan's children, write the status (a merge patch, unless unchanged), then
    delete (logging each child that changed). The status is the record: a finished child is
    deleted only once its outcome is written, so an operator killed in between finds the
    outcome, not a missing child to make again (the kill drill caught a RolloutBatch's
    verify Job made twice that way). A child made before the status names it is found by
    the next reconcile, which plans nothing twice."""
    for manifest in create:
        if client.create(manifest):
            logger.info(f"created {manifest['kind']}/{manifest['metadata']['name']}")
    if after != before:  # skip no-op writes
        client.write_status(namespace, name, before, after)
    delete_children(client, logger, namespace, delete)


def delete_children(
    client: Writer, logger: kopf.Logger, namespace: str, delete: Iterable[tuple[str, str]]
) -> None:
    for kind, child in delete:
        if client.delete(namespace, kind, child):
            logger.info(f"deleted {kind}/{child}")


@contextmanager
def counted(namespace: str, kind: str) -> Iterator[None]:
    """Count a reconcile, and an error when the block raises (re-raised: kopf retries it
    with backoff, a temporary error)."""
    metrics.RECONCILES.labels(namespace, kind).inc()
    try:
        yield
    except Exception:
        metrics.RECONCILE_ERRORS.labels(namespace, kind).inc()
        raise


def announce(
    logger: kopf.Logger,
    body: kopf.Body,
    transition: tuple[str, str] | None,
    status: dict[str, Any],
    events: Iterable[tuple[str, str, str]],
) -> None:
    """After the status write: log the phase change, then post the plan's events."""
    log_transition(logger, transition, status)
    post_events(body, events)


def log_transition(
    logger: kopf.Logger, transition: tuple[str, str] | None, status: dict[str, Any]
) -> None:
    if transition:
        before, after = transition
        logger.info(f"phase {before} → {after}: {status.get('message', '')}")


def post_events(body: kopf.Body, events: Iterable[tuple[str, str, str]]) -> None:
    for kind, reason, message in events:
        kopf.event(body, type=kind, reason=reason, message=message)
