"""Drill 3 (issue 17), the CLI half: every generated hostile spec (tests/support/hostile_specs.py)
is refused by the spec models with the field named, and one real `cowork-gym synth` over
all of them as files refuses the lot in one run (each file named), writing nothing. The
API-server half is tests/testbed/test_drill_hostile_specs.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkgym.package.errors import PackageError
from coworkgym.spec import parse_spec_document
from coworkgym_operator.core.settings import OperatorSettings
from coworkgym_operator.environment.reconcile.loop import Observed, reconcile
from tests.drills.record import DrillResult, Row, record
from tests.support.hostile_specs import HostileSpec, hostile_specs

CASES = hostile_specs()


def refusal(case: HostileSpec) -> list[str]:
    """The CLI's problems for ``case`` ([] if it was accepted)."""
    try:
        parse_spec_document(case.doc, f"{case.id}.yaml")
    except PackageError as exc:
        return [p.removeprefix(f"{case.id}.yaml: ") for p in exc.problems]
    return []


def names_the_field(case: HostileSpec, problems: list[str]) -> bool:
    return any(p.startswith(case.field) for p in problems)


def test_there_are_at_least_200_cases_over_every_category() -> None:
    assert len(CASES) >= 200
    assert set(Counter(c.category for c in CASES)) >= {
        "wrong type",
        "out of range",
        "unknown value",
        "oversized",
        "injection",
        "unknown field",
    }


def test_every_hostile_spec_is_refused_by_the_cli_naming_its_field(tmp_path: Path) -> None:
    started = time.monotonic()
    failed: dict[str, str] = {}  # case id → what went wrong
    for case in CASES:
        problems = refusal(case)
        if not problems:
            failed[case.id] = "accepted"
        elif not names_the_field(case, problems):
            failed[case.id] = f"refused without naming {case.field}: {problems}"
    in_process_s = time.monotonic() - started

    # the real command line, once over every case as a file: one run reports them all
    specs = tmp_path / "specs"
    specs.mkdir()
    for case in CASES:
        (specs / f"{case.id}.yaml").write_text(yaml.dump(case.doc, Dumper=yaml.CSafeDumper))
    out = tmp_path / "out"
    started = time.monotonic()
    done = subprocess.run(
        [Path(sys.executable).with_name("cowork-gym"), "synth", str(specs), "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100000"},  # rich must not wrap a file name
        timeout=300,
        check=False,
    )
    cli_s = time.monotonic() - started
    not_named_by_cli = [c.id for c in CASES if f"{c.id}.yaml: " not in done.stderr]
    counts = Counter(c.category for c in CASES)
    rows = [
        Row(
            what=f"{category}: refused, the field named",
            runs=n,
            held=n - sum(1 for c in CASES if c.category == category and c.id in failed),
        )
        for category, n in sorted(counts.items())
    ]
    record(
        DrillResult(
            drill="hostile-specs-cli",
            title="Hostile specs through the CLI",
            summary="Every generated hostile spec parsed by the spec models (what `synth`, the "
            "stage runner and the operator use), then all of them as YAML files through one "
            "real `cowork-gym synth <folder>`.",
            rows=rows,
            figures={
                "cases": len(CASES),
                "accepted": sum(1 for f in failed.values() if f == "accepted"),
                "refused_without_the_field": sum(1 for f in failed.values() if f != "accepted"),
                "cli_exit_code": done.returncode,
                "cli_files_not_named": len(not_named_by_cli),
                "written_to_out": sum(1 for _ in out.rglob("*")) if out.exists() else 0,
                "in_process_s": round(in_process_s, 2),
                "cli_s": round(cli_s, 2),
            },
            seconds=round(in_process_s + cli_s, 2),
        )
    )
    assert not failed, "\n".join(f"{k}: {v}" for k, v in failed.items())
    assert done.returncode == 2, done.stderr[-3000:]
    assert not not_named_by_cli, not_named_by_cli[:10]
    assert not out.exists() or not any(out.rglob("*"))


@pytest.mark.parametrize(
    ("case_id", "says"),
    [
        ("inject-metadata.name-dotdot", "metadata.name must be a lowercase DNS label of at"),
        ("inject-release.uri-dotdot", "spec.release.uri: must be s3://<bucket>/<prefix>"),
        ("inject-task.instruction-procedural-shell", "spec.task.instruction: only an LLM Builder"),
        ("type-task.turns-string", "spec.task.turns: Input should be a valid integer"),
        ("inject-backends.builder.baseUrl-metadata-ip", "baseUrl: points at the cloud metadata"),
    ],
)
def test_a_refusal_says_what_to_fix(case_id: str, says: str) -> None:
    [case] = [c for c in CASES if c.id == case_id]
    assert any(says in problem for problem in refusal(case)), refusal(case)


def test_the_reconcile_fails_every_hostile_spec_naming_its_field() -> None:
    """What the CRD refuses, the operator refuses too (an older CRD, a hand-edited one):
    Failed, InvalidSpec, the field named, no child created, no exception. metadata.name is
    the API server's alone (CEL reads it; the reconcile never sees a bad one)."""
    settings = OperatorSettings()
    wrong = []
    for case in (c for c in CASES if c.field != "metadata.name"):
        meta = {"name": "h", "namespace": "ns", "uid": "u", "generation": 1}
        env = {**case.doc, "metadata": meta}
        plan = reconcile(env, Observed(), settings)
        failed: dict[str, Any] = next(
            (c for c in plan.status.get("conditions", []) if c["type"] == "Failed"), {}
        )
        if not (
            plan.status.get("phase") == "Failed"
            and failed.get("reason") == "InvalidSpec"
            and case.field in failed.get("message", "")
            and not plan.create
        ):
            wrong.append(f"{case.id}: {plan.status.get('phase')} {failed}")
    assert not wrong, "\n".join(wrong[:10])
