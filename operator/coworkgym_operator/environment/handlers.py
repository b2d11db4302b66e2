"""The CoworkEnvironment controller: one idempotent reconcile, run on create, update and
resume, on the events of its stage Jobs and pods, and at the deadlines the clock sets (a
stage pod's start grace, a retry after an error: controllers/wakeups.py); one resync sweep
looks again, now and then, at each unfinished environment that changed since its last
reconcile, in case an event was missed. An event that changes nothing the reconcile reads
is decided on the event loop from the watches' indices, without an API call. Each reconcile
reads the object afresh and writes its whole status once, in turn with the object's other
reconciles; events follow, posted under the operator's own name. The log says what changed
(a phase, a child created or deleted), not that a handler ran."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kopf

from coworkgym_operator.core import metrics as shared_metrics
from coworkgym_operator.core import shutdown
from coworkgym_operator.core.api import GROUP, VERSION
from coworkgym_operator.core.builders import LABEL_SANDBOX
from coworkgym_operator.core.gateway_address import by_address
from coworkgym_operator.core.kube import kube as shared_kube
from coworkgym_operator.core.settings import SETTINGS, OperatorSettings
from coworkgym_operator.core.sharding import shard_from_env, watch_only_shard
from coworkgym_operator.core.turns import (
    Turns,
    carry_out,
    counted,
    delete_children,
    fresh,
    log_transition,
    post_events,
)
from coworkgym_operator.core.wakeups import Key, Wakeups
from coworkgym_operator.environment import metrics
from coworkgym_operator.environment.api.types import KIND, PLURAL
from coworkgym_operator.environment.builders import LABEL_ENV
from coworkgym_operator.environment.kube import EnvironmentKube
from coworkgym_operator.environment.reconcile.loop import (
    Observed,
    Plan,
    pending_job_name,
    reconcile,
)
from coworkgym_operator.environment.watches import Indices

COMPONENT = "cowork-gym-operator"  # events' source, in `kubectl describe` and `get events`
FINALIZER = f"{GROUP}/cleanup"
# what operators before 0.2 put on every environment: removed on deletion, so that an
# environment created by an older operator is not stranded by the rename
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
TERMINAL = ("Released", "Rejected", "Failed")
_kube: EnvironmentKube | None = None
log = logging.getLogger("coworkgym_operator.environment")

# reconciles of one environment take turns, each on a fresh read (core/turns.py)
_turns = Turns()
# when to look at an environment again without an event (core/wakeups.py)
WAKEUPS = Wakeups()
shared_metrics.WAKEUPS_PENDING.set_function(WAKEUPS.pending)
# an event-run reconcile that raised runs again after the reconcile interval, doubling on
# each failure in a row up to this (an API server back after an outage is noticed soon)
RETRY_MAX_SECONDS = 30.0


def kube() -> EnvironmentKube:
    """The environment's I/O, on the operator's one client (core/kube.py)."""
    global _kube
    if _kube is None:
        _kube = EnvironmentKube(shared_kube().api)
    return _kube


# event handlers that run on every event of the stage Jobs and pods
_PER_EVENT = ("Handler 'on_stage_job' succeeded.", "Handler 'on_stage_pod' succeeded.")


class _QuietTimerSuccess(logging.Filter):
    """kopf logs "Timer 'on_timer' succeeded." at INFO on every run of the other kinds'
    timers (every few seconds per object), and the same of the stage Jobs' and pods'
    event handlers on every event, saying nothing; and it posts what it logs at INFO as
    Kubernetes events (an API call each). Failures (logged at ERROR) still pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in _PER_EVENT:
            return False
        return not (message.startswith("Timer ") and message.endswith(" succeeded."))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # kopf's own bookkeeping in annotations, so that status holds only our schema
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.INFO  # INFO events and above
    settings.posting.reporting_component = COMPONENT
    settings.posting.reporting_instance = os.environ.get("POD_ID") or os.uname().nodename
    settings.posting.event_name_prefix = "cowork-gym-"
    settings.watching.server_timeout = 60
    # we watch one known CRD; scanning for namespaces/CRDs only costs a namespaced operator
    # (without cluster-wide list rights) a minute of retries at start-up
    settings.scanning.disabled = True
    # a sharded replica watches its shard only (sharding.py)
    watch_only_shard(settings, shard_from_env())
    # A deleted object keeps its finalizer until its timer has exited; a timer caught
    # mid-run (waiting for the object's turn) is polled again after this long (kopf's
    # default, 60 s, held each such deletion a minute)
    settings.background.cancellation_polling = 1.0
    quiet = _QuietTimerSuccess()
    for name in ("kopf.objects", "kopf"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietTimerSuccess) for f in logger.filters):
            logger.addFilter(quiet)


@kopf.on.startup()
async def start_wakeups(env_versions: Any = None, **_: Any) -> None:
    WAKEUPS.start(_wake)  # on kopf's event loop
    if env_versions is not None:  # kopf's index is live: the sweep reads it as it grows
        _sweeps.add(asyncio.create_task(_resync(env_versions)))


@kopf.on.cleanup()
async def forget_wakeups(**_: Any) -> None:
    # the next operator in this process (tests run several) has a loop of its own
    WAKEUPS.stop()
    _INDICES.clear()
    for sweep in _sweeps:
        sweep.cancel()
    _sweeps.clear()


def family_of(spec: dict[str, Any]) -> str:
    """The family label of the metrics: the spec's family, or the one its labels choose
    (the Builder makes the same choice), so it is one of a fixed set."""
    from coworkgym.families import FAMILIES, family_for_scenario

    task = spec.get("task") or {}
    if task.get("family"):
        return str(task["family"]) if task["family"] in FAMILIES else "unknown"
    scenario = str((task.get("labels") or {}).get("scenario", ""))
    return family_for_scenario(scenario, int(task.get("seed", 0))).name


def _reconcile(body: kopf.Body, logger: kopf.Logger, indices: Indices | None) -> None:
    if indices is not None:
        _INDICES["latest"] = indices

    # gone, or going: on_delete handles it
    def once(current: dict[str, Any], body: kopf.Body, logger: kopf.Logger) -> None:
        _reconcile_once(current, body, logger, indices)

    _turns.reconcile(body, logger, kube().read_environment, once)


# What this process created, per environment uid, until the watches deliver it: read as
# existing meanwhile, so a reconcile right after a create does not create it again.
_created: defaultdict[str, set[str]] = defaultdict(set)
# uid → (resourceVersion, pending Job, observation) of the last reconcile that had nothing
# to do: an event or timer run that finds the same returns at once, without an API call.
_settled: dict[str, tuple[str, str | None, str]] = {}
_INDICES: dict[str, Indices] = {}  # the latest handed to a handler, for the wake-ups
_sweeps: set[asyncio.Task[None]] = set()  # the resync's task, held until cleanup
# uid → reconciles in a row that raised outside kopf's own retries (events, wake-ups)
_failures: defaultdict[str, int] = defaultdict(int)


def _observe(env: dict[str, Any], indices: Indices | None) -> Observed:
    namespace, name = env["metadata"]["namespace"], env["metadata"]["name"]
    uid, pending = str(env["metadata"].get("uid")), pending_job_name(env)
    if indices is None:  # no watches registered: ask the API
        job = kube().observe_job(namespace, pending) if pending else None
        return Observed(job, kube().existing_children(namespace, name), datetime.now(UTC))
    observed = _observe_indexed(namespace, name, uid, pending, indices)
    # delivered by the watch: from now on the index is the truth (pruned here, in the
    # environment's turn, not on the event loop, which only reads a copy)
    _created.get(uid, set()).difference_update(indices.children(namespace, name))
    return observed


def _observe_indexed(
    namespace: str, name: str, uid: str, pending: str | None, indices: Indices
) -> Observed:
    children = indices.children(namespace, name)
    made = set(_created.get(uid, ())) - children  # a copy: worker threads update the set
    job = indices.job(namespace, pending, f"Job/{pending}" in made) if pending else None
    existing = children | {c for c in made if not c.startswith("Job/")}
    return Observed(job, existing, datetime.now(UTC))


def _seen(observed: Observed) -> str:
    return repr((observed.job, sorted(observed.existing_children)))


def _clock_wait(observed: Observed) -> float | None:
    """How long until time alone may change the plan (a stage pod that has not started,
    once its grace is up); None: only an event can. Past the grace, or while the Job's
    creation time is not known yet, it is looked at every reconcile interval."""
    job = observed.job
    if job is None or job.state != "running" or job.start.started:
        return None
    if job.created_at is None or observed.now is None:
        return SETTINGS.reconcile_interval
    waited = (observed.now - job.created_at).total_seconds()
    left = SETTINGS.stage_start_grace_seconds - waited
    return left + 0.1 if left > 0 else SETTINGS.reconcile_interval


def _unchanged(uid: str, namespace: str, name: str, indices: Indices, version: str | None) -> bool:
    """Whether the last reconcile had nothing to do and nothing it reads has changed since
    (``version``: the environment's resourceVersion, where the caller has the object). If
    so and the clock is still to come, its wake-up is asked for again: the queue keeps one
    per environment, the soonest, and this may be it (work in flight's, superseding the
    clock's), spent here without a reconcile to ask again."""
    known = _settled.get(uid)
    if known is None or (version is not None and known[0] != version):
        return False
    observed = _observe_indexed(namespace, name, uid, known[1], indices)
    wait = _clock_wait(observed)
    if _seen(observed) != known[2] or (wait is not None and wait <= SETTINGS.reconcile_interval):
        return False
    if wait is not None:
        WAKEUPS.at((namespace, name, uid), wait)
    return True


def _reconcile_once(
    current: dict[str, Any], body: kopf.Body, logger: kopf.Logger, indices: Indices | None
) -> None:
    env, namespace, name = fresh(current)
    uid = str(env["metadata"].get("uid"))
    with counted(namespace, "CoworkEnvironment"):
        observed = _observe(env, indices)
        plan = reconcile(env, observed, settings_now())
        # The status first, then the deletes: a finished stage's pod holds its result, so a
        # kill between removing it and recording the result would lose it and run the
        # stage again; recorded first, a restarted operator reads the end from the status
        # and plans the same deletes again. The pods go before the claims, whose presence
        # is what plans both again after a kill.
        carry_out(kube(), logger, namespace, name, [], plan.create, env["status"], plan.status)
        if plan.delete_stage_pods:
            kube().delete_stage_pods(namespace, name)
        delete_children(kube(), logger, namespace, plan.delete)
    _created[uid].update(f"{m['kind']}/{m['metadata']['name']}" for m in plan.create)
    _created[uid].difference_update(f"{kind}/{child}" for kind, child in plan.delete)
    idle = not (plan.create or plan.delete or plan.delete_stage_pods) and (
        plan.status == env["status"]
    )
    if idle and indices is not None:
        resource_version = str(env["metadata"].get("resourceVersion"))
        _settled[uid] = (resource_version, pending_job_name(env), _seen(observed))
    else:
        _settled.pop(uid, None)
    # Work in flight (a child made or going, a status written) is looked at again every
    # reconcile interval until a reconcile finds nothing to do: some of what follows it
    # sends no event here (a claim finally gone). A settled one waits for events, and for
    # the clock where the clock alone may change the plan.
    wait = _clock_wait(observed) if idle else SETTINGS.reconcile_interval
    if wait is not None:
        WAKEUPS.at((namespace, name, uid), wait)
    log_transition(logger, plan.transition, plan.status)
    _record(namespace, name, _family(env), plan, taken_up=not env["status"].get("phase"))
    post_events(body, plan.events)


def settings_now() -> OperatorSettings:
    """The settings, with the gateway's host name resolved to an address for the stage
    pods (gateway_address says why)."""
    url = SETTINGS.gateway_url
    resolved = by_address(url)
    return SETTINGS if resolved == url else replace(SETTINGS, gateway_url=resolved)


def _family(env: dict[str, Any]) -> str:
    try:
        return family_of(env["spec"])
    except (KeyError, TypeError, ValueError):  # an invalid spec: still counted
        return ""


def _record(namespace: str, name: str, family: str, plan: Plan, taken_up: bool = False) -> None:
    labels = (namespace, family)
    metrics.observe_phase(namespace, name, family, plan.status.get("phase"))
    if taken_up and plan.status.get("phase"):
        metrics.TAKEN_UP.labels(*labels).inc()
    if plan.transition:
        shared_metrics.TRANSITIONS.labels(namespace, "CoworkEnvironment").inc()
    for defect in plan.defects:
        metrics.DEFECTS.labels(*labels, defect.code, defect.owner).inc()
    if plan.stage_seconds:
        stage, seconds = plan.stage_seconds
        metrics.STAGE_SECONDS.labels(*labels, stage).observe(seconds)
    if plan.job_failed:
        metrics.JOB_FAILURES.labels(*labels, plan.job_failed).inc()
    if plan.llm_usage:
        used = plan.llm_usage
        metrics.ROLE_REQUESTS.labels(*labels, used.role).inc(used.requests)
        metrics.ROLE_TOKENS.labels(*labels, used.role, "prompt").inc(used.prompt_tokens)
        metrics.ROLE_TOKENS.labels(*labels, used.role, "completion").inc(used.completion_tokens)
    if plan.finished:
        metrics.FINISHED.labels(*labels, plan.finished).inc()
        metrics.ITERATIONS.labels(*labels).observe(plan.status.get("iteration", 0))
        if plan.finished == "rejected":
            metrics.BUDGET_EXHAUSTED.labels(*labels).inc()


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def on_change(body: kopf.Body, logger: kopf.Logger, **kwargs: Any) -> None:
    # async, so that a run queued while the operator stops costs no hop through a thread
    if not shutdown.stopping():
        await asyncio.to_thread(_reconcile, body, logger, Indices.of(kwargs))


@kopf.index(GROUP, VERSION, PLURAL)
def env_versions(
    namespace: str | None, name: str, uid: str | None, meta: Any, status: Any, **_: Any
) -> dict[tuple[str, str], tuple[str, str]]:
    """Every unfinished environment's uid and resourceVersion: what the resync sweeps. A
    tuple per object, where a kopf timer per object held a task, its stopper and its log
    adapter."""
    if (status or {}).get("phase") in TERMINAL:
        return {}
    return {(str(namespace), name): (str(uid), str(meta.get("resourceVersion")))}


async def _resync(versions: Any) -> None:
    """Every resync interval, look again at each unfinished environment that changed since
    its last reconcile had nothing to do (decided from the indices: for a settled one, no
    API call), in case an event was missed."""
    while True:
        await asyncio.sleep(SETTINGS.resync_interval)
        indices = _INDICES.get("latest")
        if indices is None or shutdown.stopping():
            continue
        for (namespace, name), entries in list(versions.items()):
            for uid, version in list(entries):
                if not _unchanged(uid, namespace, name, indices, version):
                    _settled.pop(uid, None)  # the wake-up's reconcile must run
                    WAKEUPS.at((namespace, name, uid), 0.0)


async def _nudge(key: Key, logger: kopf.Logger, indices: Indices, source: str) -> None:
    """Something an environment's reconcile reads may have changed (an event, a deadline):
    reconcile it, unless nothing it reads did. A reconcile that raises is retried here
    with backoff, as kopf retries its own handlers'."""
    namespace, name, uid = key
    if shutdown.stopping():
        return
    if _unchanged(uid, namespace, name, indices, None):
        metrics.NUDGES.labels(source, "unchanged").inc()
        return
    metrics.NUDGES.labels(source, "reconciled").inc()
    meta = {"namespace": namespace, "name": name, "uid": uid}
    raw: Any = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": meta}
    try:
        await asyncio.to_thread(_reconcile, kopf.Body(raw), logger, indices)
    except Exception as exc:  # any failure: retried, and logged
        _failures[uid] += 1
        delay = min(SETTINGS.reconcile_interval * 2.0 ** (_failures[uid] - 1), RETRY_MAX_SECONDS)
        logger.warning(f"reconcile of {name} failed ({exc}); again in {delay:g} s")
        WAKEUPS.at(key, delay)
    else:
        _failures.pop(uid, None)


async def _wake(key: Key) -> None:
    indices = _INDICES.get("latest")
    if indices is not None:
        logger = logging.LoggerAdapter(log, {"object": f"{key[0]}/{key[1]}"})
        await _nudge(key, logger, indices, "wakeup")


def _not_stopping(**_: Any) -> bool:
    return not shutdown.stopping()


def _owner(metadata: Any) -> str | None:
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == KIND and ref.get("controller"):
            return str(ref.get("uid"))
    return None


# The handlers below are async and decide on the event loop: the many events that change
# nothing a reconcile reads (a pod's scheduler retries, a Job's pod counters) cost no
# thread hop and no API call, and none queue behind a stop.
@kopf.on.event("batch", "v1", "jobs", labels={LABEL_ENV: kopf.PRESENT}, when=_not_stopping)
async def on_stage_job(
    body: kopf.Body, namespace: str | None, labels: Any, logger: kopf.Logger, **kwargs: Any
) -> None:
    """A stage Job came, changed or went: its environment's reconcile reads it."""
    indices = Indices.of(kwargs)
    owner = _owner(body.metadata)
    if indices is None or owner is None:
        return
    await _nudge((str(namespace), str(labels[LABEL_ENV]), owner), logger, indices, "job")


@kopf.on.event(
    "v1", "pods", labels={LABEL_ENV: kopf.PRESENT, LABEL_SANDBOX: "true"}, when=_not_stopping
)
async def on_stage_pod(
    body: kopf.Body, namespace: str | None, labels: Any, logger: kopf.Logger, **kwargs: Any
) -> None:
    """A stage pod changed (scheduled, started, could not start, ended): reconcile its
    environment now, not at a timer's next run, so a finished stage is noticed in about a
    second. The log lines of that reconcile carry the pod's name; its events go on the
    environment."""
    indices = Indices.of(kwargs)
    if indices is None:
        return
    owner = indices.owner(str(namespace), str(labels.get("job-name", "")))
    if owner is None:  # the Job's watch has not delivered it: its own event will
        return
    await _nudge((str(namespace), str(labels[LABEL_ENV]), owner), logger, indices, "pod")


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
    shutdown.refuse_while_stopping()
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    kube().delete_children(namespace, name)
    if LEGACY_FINALIZER in (body.metadata.get("finalizers") or []):
        kube().remove_finalizer(namespace, name, LEGACY_FINALIZER)
    metrics.observe_phase(namespace, name, "", None)
    _turns.forget(str(body.metadata.uid))
    _created.pop(str(body.metadata.uid), None)
    _settled.pop(str(body.metadata.uid), None)
    _failures.pop(str(body.metadata.uid), None)
    WAKEUPS.cancel((namespace, name, str(body.metadata.uid)))
    logger.info(f"deleted the children of {name}")


__all__ = [
    "configure",
    "env_versions",
    "family_of",
    "on_change",
    "on_delete",
    "on_stage_job",
    "on_stage_pod",
]
