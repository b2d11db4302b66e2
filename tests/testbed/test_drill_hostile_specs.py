"""Drill 3 (issue 17), the cluster half: every generated hostile spec
(tests/support/hostile_specs.py) through a real `kubectl apply` on the test-bed's API
server, with the operator running and watching the namespace. Each must be refused by
the API server (schema or CEL) with its field named; one the server let through would
have to end Failed with a field-named InvalidSpec reason. The operator must neither crash
nor log a handler failure, and must still walk a good environment afterwards.

(tests/unit/test_drill_hostile_specs.py gives the operator's reconcile every hostile spec
directly, as an older, looser CRD would let them through.)
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pytest
from kopf.testing import KopfRunner

from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_testbed.kopfkit import kopf_runner
from coworkgym_testbed.testbed import Testbed
from tests.drills.record import DrillResult, Row, record
from tests.support.bad_specs import GOOD
from tests.support.hostile_specs import HostileSpec, hostile_specs
from tests.support.kube import Cluster

pytestmark = [pytest.mark.testbed, pytest.mark.slow, pytest.mark.timeout(600)]
CASES = hostile_specs()


@dataclass
class Outcome:
    case: HostileSpec
    refused: bool
    names_field: bool
    stderr: str


def apply(tb: Testbed, ns: str, case: HostileSpec) -> Outcome:
    done = tb.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(case.doc), check=False)
    return Outcome(case, done.returncode != 0, names_field(case, done.stderr), done.stderr)


def names_field(case: HostileSpec, stderr: str) -> bool:
    """The API server's words name the field: ``spec.task.turns: Invalid value``, an unknown
    field ``"spec.task.typo"``, or for metadata.name its own rule's sentence."""
    if case.field == "metadata.name":
        return "metadata.name" in stderr or "name" in stderr
    return re.search(re.escape(case.field) + r"[\[.:\"]", stderr) is not None


@pytest.fixture
def operator(
    ns: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], AbstractContextManager[KopfRunner]]:
    monkeypatch.setenv("COWORKGYM_RECONCILE_INTERVAL", "0.5")
    monkeypatch.setenv(
        "COWORKGYM_SANDBOX_DEFAULTS",
        '{"nodeSelector": {"coworkgym.dev/kubelet": "played-by-test"}}',
    )
    from coworkgym_operator.environment import handlers as environment

    monkeypatch.setattr(environment, "_kube", None)
    monkeypatch.setattr(environment, "SETTINGS", OperatorSettings.from_env())

    def start() -> AbstractContextManager[KopfRunner]:
        args = ["run", "--standalone", "--namespace", ns, "-m", "coworkgym_operator.controllers"]
        return kopf_runner(args, timeout=300)

    return start


def test_every_hostile_spec_is_refused_at_the_api_server_and_the_operator_stays_up(
    cluster: Cluster, operator: Callable[[], AbstractContextManager[KopfRunner]]
) -> None:
    started = time.monotonic()
    with operator() as runner:
        with ThreadPoolExecutor(max_workers=4) as pool:
            outcomes = list(pool.map(lambda c: apply(cluster.tb, cluster.ns, c), CASES))
        apply_s = time.monotonic() - started
        stored = json.loads(
            cluster.tb.kubectl("get", "cwe", "-n", cluster.ns, "-o", "json").stdout
        )["items"]
        # whatever got through must end Failed, naming the field (none is expected)
        through = {o.case.name: o for o in outcomes if not o.refused}
        ended: dict[str, dict[str, Any]] = {}
        for name in through:

            def has_failed(name: str = name) -> bool:
                return cluster.phase(name) == "Failed"

            cluster.wait(has_failed, 60, f"{name} Failed")
            ended[name] = cluster.env(name)["status"]
        # the operator still does its work: a good environment gets its Builder Job
        good = {**GOOD, "metadata": {"name": "after-the-drill"}}
        cluster.apply(json.dumps(good))
        cluster.job("after-the-drill-builder-i0-a1")
        alive = runner._thread.is_alive()
    total_s = time.monotonic() - started

    handler_failures = runner.output.count("failed with an exception")
    tracebacks = runner.output.count("Traceback (most recent call last)")
    refused_unnamed = [o for o in outcomes if o.refused and not o.names_field]
    failed_unnamed = [
        n for n, s in ended.items() if through[n].case.field not in s.get("message", "")
    ]
    counts = Counter(c.category for c in CASES)
    bad = {o.case.id for o in refused_unnamed} | {through[n].case.id for n in failed_unnamed}
    rows = [
        Row(
            what=f"{category}: refused by the API server, the field named",
            runs=n,
            held=n - sum(1 for o in outcomes if o.case.category == category and o.case.id in bad),
            note=f"{sum(1 for o in outcomes if o.case.category == category and not o.refused)} "
            "let through, then Failed",
        )
        for category, n in sorted(counts.items())
    ]
    rows.append(
        Row(
            what="the operator during the drill: crashes, handler failures",
            runs=1,
            held=int(alive and runner.exception is None and handler_failures == 0),
            note=f"{handler_failures} handler failures, {tracebacks} tracebacks; a good "
            "environment got its Builder Job afterwards",
        )
    )
    record(
        DrillResult(
            drill="hostile-specs-api",
            title="Hostile specs through kubectl apply",
            summary="Every generated hostile CoworkEnvironment applied with `kubectl apply` "
            "(4 at a time) to the test-bed's API server, the operator (kopf, in-process) "
            "watching the namespace; then a good environment, to see it still reconciles.",
            rows=rows,
            figures={
                "cases": len(CASES),
                "refused_by_the_api_server": sum(o.refused for o in outcomes),
                "let_through": len(through),
                "stored_objects_after_the_barrage": len(stored),
                "refused_without_the_field": len(refused_unnamed),
                "operator_handler_failures": handler_failures,
                "operator_alive": alive,
                "apply_s": round(apply_s, 1),
            },
            seconds=round(total_s, 1),
        )
    )
    assert not refused_unnamed, "\n\n".join(
        f"{o.case.id} (wanted {o.case.field}):\n{o.stderr[:600]}" for o in refused_unnamed[:10]
    )
    assert not failed_unnamed, failed_unnamed
    assert alive and runner.exception is None
    assert handler_failures == 0, runner.output[-4000:]
