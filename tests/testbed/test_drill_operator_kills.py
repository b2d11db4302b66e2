"""Drill 1 (issue 17): the operator SIGKILLed again and again, at random points of its work,
while CoworkEnvironments walk the loop and a RolloutBatch runs its rollouts, on the
test-bed's API server. The operator runs as its own process (`python -m coworkgym_operator`,
as in its pod) and is started again after each kill; once it visibly works again (a new Job,
a changed status: that wait is the time to recover) it is killed after a random 0–1.5 s.
The test plays the kubelet (tests/drills/loop.py), so stages and rollouts are instant and
every kill lands mid-reconcile.

At the end every environment is Released, announced at most once, with exactly one Job per
stage and iteration (no attempt retried, no Job made twice); the batch Succeeded with every
rollout's outcome recorded once, one rollout and one verify Job each; no pod, claim or
volume is left. Counts: COWORKGYM_DRILL_KILLS (50), COWORKGYM_DRILL_ENVIRONMENTS (20),
COWORKGYM_DRILL_BATCH_SAMPLES (4 per environment, 3 environments). Environments released
before the kills are spent are followed by one more per kill, so every kill finds work.

What it does not cover: pods that really run on the node, and the S3 objects of a real
release (the restart drill, test_drill_control_plane.py, publishes through S3)."""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from coworkgym_operator.rollouts.builders import job_name as batch_job_name
from coworkgym_operator.rollouts.builders import rollout_id
from tests.drills.loop import (
    STAGES,
    Kubelet,
    Ledger,
    OperatorProcess,
    announced,
    left_behind,
    phases,
)
from tests.drills.record import DrillResult, Row, record
from tests.support.kube import Cluster, manifest

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.slow,
    pytest.mark.runs_last,  # its 42 environments' objects are still being deleted after it
    # At the counts it runs 9 min on a quiet machine, up to 25 beside the rest of
    # the suite (each kill costs an operator start-up: 7 s median, 30 s when busy); the
    # test-bed session it runs in ends well before the suite's longest one.
    pytest.mark.timeout(3000),
]
MIN_KILLS, MIN_ENVIRONMENTS = 50, 20  # issue 17's counts: the defaults, and the page's floor
KILLS = int(os.environ.get("COWORKGYM_DRILL_KILLS", MIN_KILLS))
ENVIRONMENTS = int(os.environ.get("COWORKGYM_DRILL_ENVIRONMENTS", MIN_ENVIRONMENTS))
BATCH_ENVIRONMENTS = 3
SAMPLES = int(os.environ.get("COWORKGYM_DRILL_BATCH_SAMPLES", "4"))
BATCH = "kill-batch"
WORK_S = (0.0, 1.5)  # how long the operator works after recovering, before the next kill
RECOVERY_LIMIT_S = 90.0  # a restarted operator that does nothing this long has not recovered
DEADLINE_S = 2400.0
# Each round lists every Job, pod and environment, about 0.2 s of the test's CPU with the
# client's models; polled every 0.1 s that kept a core busy for the whole drill, slowing the
# operator it measures (recovery 41 s median in a loaded CI run, 7 s quiet)
POLL_S = 0.5


def batch_manifest(environments: list[str]) -> str:
    return json.dumps(
        {
            "apiVersion": "coworkgym.dev/v1alpha1",
            "kind": "RolloutBatch",
            "metadata": {"name": BATCH},
            "spec": {
                "environments": {"names": environments},
                "policies": [{"harness": "oracle", "model": "oracle"}],
                "samplesPerEnvironment": SAMPLES,
                "concurrency": 3,
                "output": {"uri": "s3://cowork-gym/rollouts/drill"},
            },
        }
    )


def apply_all(cluster: Cluster, names: list[str]) -> None:
    items = [json.loads(manifest(n)) for n in names]
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def expected_environment_jobs(names: list[str]) -> set[str]:
    # builder, verifier and detector in iteration 0; the release counts as iteration 1
    return {f"{n}-{s}-i{1 if s == 'release' else 0}-a1" for n in names for s in STAGES}


def expected_batch_jobs() -> set[str]:
    rids = [rollout_id(e, 0, s) for e in range(BATCH_ENVIRONMENTS) for s in range(SAMPLES)]
    steps = [batch_job_name(BATCH, "fetch"), batch_job_name(BATCH, "collect")]
    return set(steps) | {batch_job_name(BATCH, w, r) for r in rids for w in ("rollout", "verify")}


def batch_status(cluster: Cluster) -> dict[str, Any]:
    got: Any = cluster.custom.get_namespaced_custom_object(
        "coworkgym.dev", "v1alpha1", cluster.ns, "rolloutbatches", BATCH
    )
    return dict(got.get("status") or {})


def test_the_operator_killed_50_times_loses_and_duplicates_nothing(
    cluster: Cluster, tmp_path: Path
) -> None:
    rng = random.Random(17)
    names = [f"kill-{i:02d}" for i in range(ENVIRONMENTS)]
    operator = OperatorProcess(cluster.tb, cluster.ns, tmp_path / "operator.log")
    ledger = Ledger(cluster.custom, cluster.ns)
    kubelet = Kubelet(cluster.v1, cluster.batch, cluster.ns)
    started = time.monotonic()
    operator.start()
    restarted_at = time.monotonic()
    apply_all(cluster, names)
    recovery: list[float] = []
    next_kill: float | None = None
    batch_named: list[str] = []
    done = fed = False
    try:
        while time.monotonic() < started + DEADLINE_S:
            jobs = cluster.batch.list_namespaced_job(cluster.ns).items
            ledger.observe(jobs)
            kubelet.step(jobs)
            released = sorted(
                n for n, p in phases(cluster.custom, cluster.ns).items() if p == "Released"
            )
            if not batch_named and len(released) >= BATCH_ENVIRONMENTS:
                batch_named = released[:BATCH_ENVIRONMENTS]
                cluster.apply(batch_manifest(batch_named))
            batch_done = bool(batch_named) and batch_status(cluster).get("phase") == "Succeeded"
            done = set(released) >= set(names) and batch_done
            now = time.monotonic()
            if next_kill is None:  # waiting for the restarted operator to work again
                took = ledger.first_progress_after(restarted_at)
                if took is not None:
                    if operator.kills:  # the first start is no recovery
                        recovery.append(took)
                    next_kill = now + rng.uniform(*WORK_S)
                elif done and operator.kills < KILLS and not fed:
                    # the killed process finished everything just before it died: the
                    # restarted one needs work to show that it recovered
                    names.append(f"kill-{len(names):02d}")
                    cluster.apply(manifest(names[-1]))
                    fed = True
                elif not done:
                    assert now - restarted_at < RECOVERY_LIMIT_S, (
                        f"the operator did nothing for {RECOVERY_LIMIT_S:g} s after restart "
                        f"{operator.starts}"
                    )
            if done and operator.kills >= KILLS:
                break
            if next_kill is not None and now >= next_kill and operator.kills < KILLS:
                if done:  # everything ended before the kills were spent: give it work
                    names.append(f"kill-{len(names):02d}")
                    cluster.apply(manifest(names[-1]))
                operator.kill()
                # the dead process's last writes are folded in now, not read as recovery
                ledger.observe(cluster.batch.list_namespaced_job(cluster.ns).items)
                operator.start()
                restarted_at, next_kill, fed = time.monotonic(), None, False
            time.sleep(POLL_S)
        # undisturbed now: whatever is still owed (stage pods deleted, events) is done
        # (not raising here: what is left behind is a row of the record, asserted below)
        settle = time.monotonic() + 60
        while left_behind(cluster.v1, cluster.ns)["pods"] and time.monotonic() < settle:
            time.sleep(0.5)
    finally:
        operator.stop()
    total_s = time.monotonic() - started

    final = phases(cluster.custom, cluster.ns)
    not_released = sorted(n for n in names if final.get(n) != "Released")
    env_jobs = {n for n in ledger.jobs if not n.startswith(BATCH)}
    batch_jobs = {n for n in ledger.jobs if n.startswith(BATCH)}
    expected = expected_environment_jobs(names)
    twice = ledger.made_twice()
    extra_env, missing_env = sorted(env_jobs - expected), sorted(expected - env_jobs)
    extra_batch = sorted(batch_jobs - expected_batch_jobs())
    missing_batch = sorted(expected_batch_jobs() - batch_jobs)
    counted = announced(cluster.v1, cluster.ns, "Released", names)
    announced_twice = sorted(n for n, c in counted.items() if c > 1)
    never_announced = sorted(n for n, c in counted.items() if c == 0)
    status = batch_status(cluster) if batch_named else {}
    outcomes: dict[str, str] = status.get("outcomes") or {}
    rollouts = BATCH_ENVIRONMENTS * SAMPLES
    not_passed = sorted(r for r, o in outcomes.items() if o != "passed")
    batch_events = announced(cluster.v1, cluster.ns, "Succeeded", [BATCH])[BATCH]
    left = left_behind(cluster.v1, cluster.ns)
    left_count = sum(len(v) for v in left.values())
    rows = [
        Row(
            what=f"{len(names)} environments walked build → release while the operator was "
            f"SIGKILLed {operator.kills} times and restarted",
            runs=len(names),
            held=len(names) - len(not_released),
            lost="nothing" if not not_released else f"{len(not_released)} not Released",
            recovery_s=round(statistics.median(recovery), 1) if recovery else None,
            note=f"time to recover: restart → the next Job or status written, median of "
            f"{len(recovery)}, max {max(recovery, default=0):.1f} s",
        ),
        Row(
            what="one Job per stage and iteration (none retried, none made twice)",
            runs=len(expected),
            held=len(expected) - len(missing_env) - len(extra_env),
            lost="nothing" if not (extra_env or twice) else f"{len(extra_env)} extra Jobs",
            note=f"{len(twice)} Job names made twice",
        ),
        Row(
            what="the Released event posted at most once per environment",
            runs=len(names),
            held=len(names) - len(announced_twice),
            note=f"{len(announced_twice)} twice; {len(never_announced)} never (an event is "
            "posted after the status write: a kill between the two loses it)",
        ),
        Row(
            what=f"a RolloutBatch of {rollouts} rollouts (3 environments × {SAMPLES}, 3 at "
            "once) under the same kills: each outcome recorded once, one rollout and one "
            "verify Job each",
            runs=rollouts,
            held=len(outcomes) - len(not_passed) if not (extra_batch or missing_batch) else 0,
            lost="nothing"
            if len(outcomes) == rollouts and not not_passed
            else f"{rollouts - len(outcomes) + len(not_passed)} rollouts",
            note=f"batch {status.get('phase', 'never made')}, its Succeeded event posted "
            f"{batch_events}×",
        ),
        Row(
            what="nothing left behind: pods, claims, volumes",
            runs=1,
            held=int(left_count == 0),
            note=", ".join(f"{len(v)} {k}" for k, v in left.items()),
        ),
    ]
    record(
        DrillResult(
            drill="operator-kills",
            title="Operator kills",
            summary=f"The operator as a process, SIGKILLed {operator.kills} times at random "
            "points of its work (0–1.5 s after it worked again) and restarted, while "
            "environments walk the loop and a RolloutBatch runs, on the test-bed's API "
            "server; the test plays the kubelet (no pods run, no S3 release).",
            rows=rows,
            figures={
                "kills": operator.kills,
                "environments": len(names),
                "rollouts": rollouts,
                "recovery_median_s": round(statistics.median(recovery), 2) if recovery else None,
                "recovery_max_s": round(max(recovery), 2) if recovery else None,
                "jobs_made_twice": len(twice),
                "released_events_missing": len(never_announced),
                "left_behind": left_count,
                "tracebacks_in_log": operator.tracebacks(),
            },
            seconds=round(total_s, 1),
        )
    )
    assert done, f"not finished in {DEADLINE_S:g} s: {not_released}, batch {status.get('phase')}"
    assert operator.kills >= KILLS
    assert not not_released, {n: final.get(n) for n in not_released}
    assert not twice, twice
    assert not extra_env and not missing_env, (extra_env, missing_env)
    assert not extra_batch and not missing_batch, (extra_batch, missing_batch)
    assert len(outcomes) == rollouts and not not_passed, outcomes
    assert batch_events == 1
    assert not announced_twice, announced_twice
    assert left_count == 0, left
