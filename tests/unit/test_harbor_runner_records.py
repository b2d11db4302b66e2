"""check's labels on Harbor tasks against what Harbor's own runner concluded here.

benchmarks/harbor_runner.py ran Harbor 0.25's runner (``harbor run``, podman, check's
local bases standing in for the registry images) with the oracle and the no-op agent on
every task of both Harbor corpora (tests/fixtures/harbor-real/: other people's tasks;
tests/fixtures/harbor_tasks/: ours, each written to one label) and kept the rewards,
Harbor's exceptions and the verifier's telling lines in each corpus' harbor-runner.json.
Each verdict check must reach (labels.toml) has to agree with that evidence wherever an
oracle and a no-op can show it: an accepted task is one Harbor's runner passes with the
oracle and fails doing nothing; a flagged code that says the oracle fails, or doing nothing
passes, is what Harbor's runner saw too; a could-not-run is a task Harbor's runner could not
get a verdict on here either, for the reason named. Defects only a gaming agent shows (a
leak, a forgeable grader, a corrupted artifact accepted) are not visible to an oracle and a
no-op; for those the records show that Harbor ran the task, so the flag is not this
machine's limit in disguise.
tests/integration/test_harbor_runner.py reruns two tasks to keep the records reproducible.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"
CORPORA = ("harbor-real", "harbor_tasks")
LABELS = {c: tomllib.loads((FIXTURES / c / "labels.toml").read_text()) for c in CORPORA}
RECORDS = {c: json.loads((FIXTURES / c / "harbor-runner.json").read_text()) for c in CORPORA}
CASES = [(corpus, name) for corpus in CORPORA for name in sorted(LABELS[corpus])]

# What each flagged code predicts an oracle and a no-op meet under Harbor's runner.
ORACLE_FAILS = {"REFERENCE_REJECTED", "SOLUTION_FAILED"}
NOP_PASSES = {"ACCEPTS_UNTOUCHED"}
# The reward below which check counts a plain Harbor task's state as failed (its
# ``Thresholds`` when the task has no Cowork verifier): doing nothing must stay below it.
FAILING_BAR = 0.5
NO_REWARD = {"VERIFIER_INVALID"}  # the verifier writes none
NO_ORACLE = {"PACKAGE_STRUCTURE"}  # no solution/solve.sh: Harbor's oracle agent fails
# Seen only by an agent that games the task: Harbor's runner must simply run it.
NOT_SHOWN_BY_ORACLE_OR_NOP = {
    "LEAK_REFERENCE_OUTPUT",
    "LEAK_VERIFIER_CONTENT",
    "VERIFIER_AGENT_WRITABLE",
    "ACCEPTS_CORRUPTED_ARTIFACT",
}
# How a host or image this machine lacks shows in Harbor's own run.
UNREACHABLE = re.compile(
    r"Could not resolve host|no stage or image found|unable to access|Failed to connect|"
    r"pinging container registry"
)


HOST = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")


def reward(entry: dict[str, Any], agent: str) -> float | None:
    """The reward Harbor's runner gave ``agent``; None when it raised or the verifier wrote
    no reward."""
    trial = entry["trials"][agent]
    if trial["error"]:
        return None
    rewards = trial["rewards"] or {}
    return rewards.get("reward", next(iter(rewards.values()), None))


def said(entry: dict[str, Any]) -> str:
    """Everything Harbor's runner said on the task: errors and the verifier's lines."""
    trials = entry["trials"].values()
    parts = [entry.get("stand_in_error") or ""]
    parts += [t["error"] or "" for t in trials]
    parts += [line for t in trials for line in t["verifier_output"] + t.get("agent_output", [])]
    return "\n".join(parts)


@pytest.mark.parametrize("corpus", CORPORA)
def test_harbor_runner_ran_every_labelled_task_with_the_oracle_and_doing_nothing(
    corpus: str,
) -> None:
    assert set(RECORDS[corpus]["tasks"]) == set(LABELS[corpus])
    assert RECORDS[corpus]["harbor"] == "0.25.0"
    for name, entry in RECORDS[corpus]["tasks"].items():
        assert set(entry["trials"]) == {"oracle", "nop"}, name


@pytest.mark.parametrize(("corpus", "name"), CASES)
def test_checks_label_agrees_with_harbors_runner(corpus: str, name: str) -> None:
    label, entry = LABELS[corpus][name], RECORDS[corpus]["tasks"][name]
    oracle, nop, why = reward(entry, "oracle"), reward(entry, "nop"), said(entry)
    if label["verdict"] == "pass":
        assert oracle == 1.0 and nop is not None and nop < 1.0, why
        assert label.get("harbor", "sound") == "sound"
    elif label["verdict"] == "could not run":
        assert oracle != 1.0, why  # Harbor's runner gets no pass here either
        # what stopped it: a host it could not reach, an image nobody has, or the step that
        # fetches from the host check names
        hosts = HOST.findall(label["reason"])
        assert UNREACHABLE.search(why) or any(host in why for host in hosts), why
    else:
        code = label["code"]
        if code in ORACLE_FAILS:
            assert oracle is not None and oracle < 1.0, why
        elif code in NOP_PASSES:
            assert nop is not None and nop >= FAILING_BAR, why
        elif code in NO_REWARD:
            assert oracle is None and nop is None, why
            assert "RewardFile" in why, why
        elif code in NO_ORACLE:
            assert entry["trials"]["oracle"]["error"], why
        elif code in NOT_SHOWN_BY_ORACLE_OR_NOP:
            assert oracle is not None, why  # Harbor ran it: not a limit of this machine
        elif code == "PACKAGE_INVALID":
            assert oracle is None and nop is None, why  # Harbor refuses it too
        else:
            pytest.fail(f"{name}: no rule says what Harbor's runner shows of {code}")
