"""Stopping within the pod's grace period.

kopf runs sync handlers in a thread pool and, on a stop, waits for every invocation it has
handed to the pool, the queued ones included (it shields them from cancellation so that no
thread is orphaned). An operator holding thousands of objects has about one queued timer
run per object, each making its API calls: at 4,000 objects that took ~145 s, against the
chart's 30 s ``terminationGracePeriodSeconds``, so the kubelet killed it mid-write.

So the process notes the stop first (``begin``, from the signal handler in ``__main__``),
and a handler invoked after that returns at once: a reconcile is level-triggered, so the
next operator redoes nothing it skipped. A delete handler raises instead, so that kopf keeps
the finalizer and the next operator deletes the children.
"""

from __future__ import annotations

import threading

import kopf

_stopping = threading.Event()


def begin() -> None:
    """The operator is stopping: handlers from now on return without doing anything."""
    _stopping.set()


def stopping() -> bool:
    return _stopping.is_set()


def refuse_while_stopping() -> None:
    """In a delete handler: keep the finalizer for the next operator while stopping."""
    if _stopping.is_set():
        raise kopf.TemporaryError("the operator is stopping; the next one deletes it", delay=5)


def reset() -> None:
    """For tests that run several operators in one process."""
    _stopping.clear()
