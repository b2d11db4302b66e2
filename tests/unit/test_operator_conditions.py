"""Conditions that tell the truth: the full condition set in every phase the reconcile can
reach, the terminal Complete condition, and the shape of ``status.loop``.

Each scenario drives the pure reconcile the way the controller does — observe the pending
stage's Job, reconcile, write the status back — and reads the conditions as a user would
(`kubectl get cwe -o yaml`)."""

from __future__ import annotations

from typing import Any

import pytest

from coworkgym_operator.core.observe import JobObservation
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.reconcile.loop import (
    Observed,
    Plan,
    pending_job_name,
    reconcile,
)
from tests.support.builders import environment_spec

SETTINGS = OperatorSettings()
LOOSE = {
    "code": "VERIFIER_PERMISSIVE_CHECK",
    "owner": "verifier",
    "severity": "error",
    "message": "component total: tolerance 90%",
}
LEAK = {
    "code": "LEAK_REFERENCE_OUTPUT",
    "owner": "builder",
    "severity": "error",
    "message": "summary.json already in s0",
}


class Run:
    """One CoworkEnvironment, reconciled as its stages finish."""

    def __init__(self, **spec: Any) -> None:
        self.env: dict[str, Any] = {
            "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 1},
            "spec": environment_spec(**spec).to_wire(),
            "status": {},
        }
        self.plan = self.reconcile(Observed())

    def reconcile(self, observed: Observed) -> Plan:
        plan = reconcile(self.env, observed, SETTINGS)
        self.env = {**self.env, "status": plan.status}
        self.plan = plan
        return plan

    def finish(self, result: dict[str, Any], ok: bool = True) -> Run:
        name = pending_job_name(self.env)
        assert name is not None, "no stage is pending"
        state = "succeeded" if ok else "failed"
        self.reconcile(Observed(JobObservation(name, state, result, seconds=2.0)))
        return self

    def ok(self, **extra: Any) -> Run:
        return self.finish({"ok": True, **extra})

    def crash(self, error: str, retryable: bool = True) -> Run:
        return self.finish({"ok": False, "error": error, "retryable": retryable}, ok=False)

    @property
    def status(self) -> dict[str, Any]:
        return self.env["status"]

    def conditions(self) -> dict[str, tuple[str, str]]:
        return {c["type"]: (c["status"], c["reason"]) for c in self.status["conditions"]}

    def message(self, kind: str) -> str:
        return str(next(c["message"] for c in self.status["conditions"] if c["type"] == kind))


def built_and_verified() -> Run:
    return Run().ok().ok()


def released() -> Run:
    return built_and_verified().ok(defects=[]).ok(uri="s3://bucket/envs/demo", digest="sha256:a")


SCENARIOS: dict[str, tuple[Any, str, dict[str, tuple[str, str]]]] = {
    "building": (
        lambda: Run(),
        "Building",
        {
            "Built": ("Unknown", "Building"),
            "VerifierBuilt": ("False", "Waiting"),
            "Executed": ("False", "Waiting"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "building again after a crash": (
        lambda: Run().crash("OOMKilled"),
        "Building",
        {
            "Built": ("Unknown", "Building"),
            "VerifierBuilt": ("False", "Waiting"),
            "Executed": ("False", "Waiting"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "constructing the verifier": (
        lambda: Run().ok(),
        "ConstructingVerifier",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("Unknown", "Constructing"),
            "Executed": ("False", "Waiting"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "executing": (
        built_and_verified,
        "Executing",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("Unknown", "Executing"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "revising the verifier": (
        lambda: built_and_verified().ok(defects=[LOOSE]),
        "Revising",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("Unknown", "Constructing"),
            "Executed": ("False", "DefectsFound"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "revising the builder (the verifier is rebuilt after it)": (
        lambda: built_and_verified().ok(defects=[LEAK, LOOSE]),
        "Revising",
        {
            "Built": ("Unknown", "Building"),
            "VerifierBuilt": ("False", "Waiting"),
            "Executed": ("False", "DefectsFound"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "executing again after a revision": (
        lambda: built_and_verified().ok(defects=[LOOSE]).ok(),
        "Executing",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("Unknown", "Executing"),
            "Released": ("False", "Waiting"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "releasing": (
        lambda: built_and_verified().ok(defects=[]),
        "Releasing",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("True", "NoDefects"),
            "Released": ("Unknown", "Releasing"),
            "Failed": ("False", "InProgress"),
            "Complete": ("False", "InProgress"),
        },
    ),
    "released": (
        released,
        "Released",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("True", "NoDefects"),
            "Released": ("True", "Released"),
            "Failed": ("False", "Released"),
            "Complete": ("True", "Released"),
        },
    ),
    "rejected (the revise budget ran out)": (
        lambda: Run(budget={"maxIterations": 1}).ok().ok().ok(defects=[LOOSE]),
        "Rejected",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("False", "DefectsFound"),
            "Released": ("False", "Rejected"),
            "Failed": ("False", "Rejected"),
            "Complete": ("True", "Rejected"),
        },
    ),
    "failed at the builder": (
        lambda: Run().crash("OOMKilled").crash("OOMKilled"),
        "Failed",
        {
            "Built": ("False", "BuilderFailed"),
            "VerifierBuilt": ("False", "NotReached"),
            "Executed": ("False", "NotReached"),
            "Released": ("False", "NotReached"),
            "Failed": ("True", "StageFailed"),
            "Complete": ("True", "Failed"),
        },
    ),
    "failed at the verifier, for good": (
        lambda: Run().ok().crash("bad verifier output", retryable=False),
        "Failed",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("False", "VerifierFailed"),
            "Executed": ("False", "NotReached"),
            "Released": ("False", "NotReached"),
            "Failed": ("True", "StageFailed"),
            "Complete": ("True", "Failed"),
        },
    ),
    "failed at the detector in a revision": (
        lambda: built_and_verified().ok(defects=[LOOSE]).ok().crash("no sandbox", False),
        "Failed",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("False", "DetectorFailed"),
            "Released": ("False", "NotReached"),
            "Failed": ("True", "StageFailed"),
            "Complete": ("True", "Failed"),
        },
    ),
    "failed at the release": (
        lambda: built_and_verified().ok(defects=[]).crash("store down").crash("store down"),
        "Failed",
        {
            "Built": ("True", "Built"),
            "VerifierBuilt": ("True", "VerifierBuilt"),
            "Executed": ("True", "NoDefects"),
            "Released": ("False", "ReleaseFailed"),
            "Failed": ("True", "StageFailed"),
            "Complete": ("True", "Failed"),
        },
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_full_condition_set_in_each_phase(scenario: str) -> None:
    make, phase, expected = SCENARIOS[scenario]
    run = make()
    assert run.status["phase"] == phase
    assert run.conditions() == expected
    for condition in run.status["conditions"]:  # every reason explained
        assert condition["message"], condition
        assert condition["observedGeneration"] == 1
    # a second reconcile on the same observation changes nothing (level-triggered)
    name = pending_job_name(run.env)
    running = Observed(JobObservation(name, "running") if name else None)
    again = reconcile(run.env, running, SETTINGS)
    assert again.status == run.status


def test_a_failed_builder_says_why_where_it_failed_and_nowhere_else() -> None:
    run = Run().crash("OOMKilled").crash("OOMKilled")
    assert "OOMKilled" in run.message("Built")
    assert "OOMKilled" in run.message("Failed") and "OOMKilled" in run.message("Complete")
    for later in ("VerifierBuilt", "Executed", "Released"):
        assert "OOMKilled" not in run.message(later)
        assert "the Builder failed" in run.message(later)


def test_while_the_builder_retries_only_its_condition_carries_the_error() -> None:
    run = Run().crash("OOMKilled")
    assert "retrying: OOMKilled" in run.message("Built") and "attempt 2" in run.message("Built")
    assert run.message("VerifierBuilt") == "waiting for the Builder"
    assert "OOMKilled" not in run.message("Executed") + run.message("Released")


def test_failed_false_never_carries_a_failure_reason() -> None:
    for scenario, (make, _, _) in SCENARIOS.items():
        failed = next(c for c in make().status["conditions"] if c["type"] == "Failed")
        if failed["status"] == "False":
            assert failed["reason"] in ("InProgress", "Released", "Rejected"), scenario


def test_complete_is_true_for_every_outcome_with_the_outcome_as_reason() -> None:
    outcomes = {}
    for make, phase, _ in SCENARIOS.values():
        run = make()
        complete = next(c for c in run.status["conditions"] if c["type"] == "Complete")
        if complete["status"] == "True":
            outcomes[phase] = complete["reason"]
    assert outcomes == {"Released": "Released", "Rejected": "Rejected", "Failed": "Failed"}


def test_released_says_where_the_package_went() -> None:
    run = released()
    assert run.message("Released") == "released to s3://bucket/envs/demo"
    assert run.status["packageUri"] == "s3://bucket/envs/demo"


def test_an_invalid_spec_sets_every_condition() -> None:
    run = Run()
    run.env["spec"]["task"]["turns"] = 99
    run.reconcile(Observed())
    assert run.status["phase"] == "Failed"
    assert run.conditions() == {
        "Built": ("False", "NotReached"),
        "VerifierBuilt": ("False", "NotReached"),
        "Executed": ("False", "NotReached"),
        "Released": ("False", "NotReached"),
        "Failed": ("True", "InvalidSpec"),
        "Complete": ("True", "Failed"),
    }
    assert "turns" in run.message("Complete")


# ---- status.loop ------------------------------------------------------------------------


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_status_is_camel_case_and_says_each_thing_once() -> None:
    run = built_and_verified().ok(defects=[LEAK, LOOSE]).ok()
    status = run.status
    assert not {k for k in _keys(status) if "_" in k}, "one naming style: camelCase"
    loop = status["loop"]
    assert set(loop) == {"stage", "attempt", "builderFeedback", "verifierFeedback", "rounds"}
    assert loop["stage"] == "verifier" and loop["attempt"] == 1
    # said once, at the top: not again inside the loop's bookkeeping
    for top in ("iteration", "stageTimings", "phase", "message", "timings", "status"):
        assert top not in loop
    assert {t["stage"] for t in status["stageTimings"]} == {"builder", "verifier", "detector"}


def test_no_feedback_is_left_once_the_loop_is_over() -> None:
    revised = built_and_verified().ok(defects=[LEAK, LOOSE]).ok().ok()
    assert revised.status["loop"]["builderFeedback"] == []  # the Builder's revision is done
    for run in (
        revised.ok(defects=[]).ok(uri="s3://b/e"),
        Run(budget={"maxIterations": 1}).ok().ok().ok(defects=[LOOSE]),
    ):
        loop = run.status["loop"]
        assert loop["builderFeedback"] == [] and loop["verifierFeedback"] == []
        assert "stage" not in loop and loop["attempt"] == 0


def test_a_status_written_by_an_older_operator_is_read_on_upgrade() -> None:
    old = {
        "phase": "ConstructingVerifier",
        "iteration": 0,
        "loop": {
            "status": {"phase": "ConstructingVerifier", "iteration": 0, "attempts": 1},
            "pending": {"stage": "verifier", "feedback": []},
            "timings": {"builder": 3.0},
        },
    }
    env = {**Run().env, "status": old}
    assert pending_job_name(env) == "demo-verifier-i0-a1"
    done = JobObservation("demo-verifier-i0-a1", "succeeded", {"ok": True}, seconds=1.0)
    plan = reconcile(env, Observed(done), SETTINGS)
    assert plan.status["phase"] == "Executing"
    assert plan.status["loop"]["stage"] == "detector"
    assert {t["stage"]: t["seconds"] for t in plan.status["stageTimings"]} == {
        "builder": 3.0,
        "verifier": 1.0,
    }
