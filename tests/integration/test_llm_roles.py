"""The LLM backend end to end, against a scripted OpenAI-compatible server over real HTTP.

The scripted model (tests/fixtures/llm/*.json) drives the Builder and the Verifier
Constructor through their tools in real sandboxes; they build a small real package (Iowa's
net generation per source) that goes through the same Issue Detector as the procedural
backend. Scenarios: a clean build is released; a build with defects is repaired by the
revise loop; the LLM review adds only evidence-checked defects; the judge's verdict feeds
a verification (and a failed judge makes it invalid); the synth CLI runs the LLM backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
import yaml

from coworkgym.detector.defects import DefectCode
from coworkgym.llm.gateway import Usage
from coworkgym.llm.judge import RubricJudge, judged_verification
from coworkgym.llm.review import LLMReviewer
from coworkgym.llm.session import LLMSession
from coworkgym.llm.settings import LLMSettings
from coworkgym.loop.local import EnvironmentRun, LocalLoop
from coworkgym.loop.machine import Phase
from coworkgym.package.package import EnvironmentPackage
from coworkgym.release import publisher_for
from coworkgym.roles.llm import configure_llm_backends, role_backends
from coworkgym.runtime.local import LocalRuntime
from coworkgym.runtime.workspace import materialize
from coworkgym.spec import EnvironmentSpec
from tests.fixtures.llm.make_fixtures import LATENT_GOAL
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(120)
MODEL = "scripted-model"
RESOURCE = Path(__file__).parents[2] / "coworkgym/resources/data/iowa-electricity.csv"


def llm_spec() -> EnvironmentSpec:
    return EnvironmentSpec.model_validate(
        {
            "task": {
                "labels": {
                    "capabilities": ["data_analysis", "aggregation"],
                    "scenario": "data_analysis/reporting/periodic_report",
                    "deliverables": ["csv", "json"],
                },
            },
            "budget": {"maxIterations": 3},
        }
    )


@dataclass
class Synthesized:
    run: EnvironmentRun
    server: ScriptedServer
    usage: Usage
    released_to: Path

    @property
    def package(self) -> EnvironmentPackage:
        assert self.run.location is not None
        return EnvironmentPackage.load(Path(self.run.location))


def synthesize(fixture: str, out: Path, name: str = "llm-env") -> Synthesized:
    spec = llm_spec()
    with ScriptedServer.from_fixture(fixture) as server:
        configure_llm_backends(spec, base_url=server.url, model=MODEL)
        runtime = LocalRuntime()
        with role_backends(name, spec, runtime, harbor_lint=False) as roles:
            loop = LocalLoop(
                roles.builder, roles.constructor, roles.detector, publisher_for(str(out))
            )
            run = loop.run(name, spec)
            assert roles.session is not None
            usage = roles.session.gateway.usage(name)
    return Synthesized(run, server, usage, out)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize("build_ok", tmp_path_factory.mktemp("released"))


# ---- a clean build ----------------------------------------------------------------------
def test_an_llm_build_passes_the_issue_detector_and_is_released(released: Synthesized) -> None:
    run = released.run
    assert run.status.phase == Phase.RELEASED, run.status.message
    assert run.status.iteration == 1 and run.status.rounds[0].defects == []
    pkg = released.package
    assert pkg.name == "coworkgym/iowa-generation-by-source"
    assert pkg.config.cowork is not None and pkg.config.cowork.family == "llm"
    # grounded in the real bundled data, copied by the Builder in its sandbox
    assert pkg.workspace()["data/generation.csv"] == RESOURCE.read_bytes()
    assert pkg.verifier is not None and len(pkg.verifier.components) == 4
    assert [r.id for r in pkg.verifier.red_lines] == ["data_unmodified"]
    assert released.server.remaining("builder") == released.server.remaining("verifier") == 0


def test_the_roles_really_executed_and_each_saw_only_its_own_directories(
    released: Synthesized,
) -> None:
    builder = released.server.lane_requests("builder")
    verifier = released.server.lane_requests("verifier")
    builder_results = "\n".join(builder[-1].tool_results())
    assert "Fossil Fuels,620129" in builder_results  # solve.sh ran in the Builder's sandbox
    assert "/verifier is outside this role's directories" in builder_results
    verifier_results = "\n".join(verifier[-1].tool_results())
    assert "/builder/instruction.md is read-only for this role" in verifier_results
    assert "Read-only file system" in verifier_results  # the same, through the shell
    assert "reference: reward 1.0" in verifier_results  # try_verifier self-validated
    assert "untouched: reward 0.0" in verifier_results
    for request in builder + verifier:
        assert request.body["model"] == MODEL and request.body["temperature"] == 0.2
        names = {t["function"]["name"] for t in request.body["tools"]}
        assert {"shell", "read_file", "write_file", "edit_file", "list_files", "submit"} <= names


def test_the_gateway_counted_every_call_of_the_environment(released: Synthesized) -> None:
    calls = len(released.server.requests)
    assert released.usage.requests == calls
    assert released.usage.total_tokens == calls * 120  # the fixtures' usage per reply


# ---- the revise loop --------------------------------------------------------------------
def test_defects_found_by_the_detector_are_repaired_by_the_revise_loop(tmp_path: Path) -> None:
    done = synthesize("build_revise", tmp_path)
    status = done.run.status
    assert status.phase == Phase.RELEASED, status.message
    assert status.iteration == 2
    first = {(d.code, d.owner) for d in status.rounds[0].defects}
    assert first == {
        (DefectCode.LEAK_USER_STATE, "builder"),
        (DefectCode.VERIFIER_NO_RED_LINE, "verifier"),
        (DefectCode.ACCEPTS_DAMAGED_INPUTS, "verifier"),
    }
    assert status.rounds[1].defects == []
    # each role's revision was told exactly what was routed to it, with evidence
    builder_tasks = [r.messages[1]["content"] for r in done.server.lane_requests("builder")]
    verifier_tasks = [r.messages[1]["content"] for r in done.server.lane_requests("verifier")]
    assert "LEAK_USER_STATE" in builder_tasks[-1] and "VERIFIER_" not in builder_tasks[-1]
    assert "VERIFIER_NO_RED_LINE" in verifier_tasks[-1]
    assert "ACCEPTS_DAMAGED_INPUTS" in verifier_tasks[-1]
    assert "LEAK_USER_STATE" not in builder_tasks[0]  # the first round had no feedback
    pkg = done.package
    assert LATENT_GOAL not in pkg.instruction
    assert pkg.verifier is not None and pkg.verifier.red_lines


# ---- the Issue Detector's LLM review ----------------------------------------------------
def test_the_llm_review_adds_only_defects_whose_evidence_checks_out(
    released: Synthesized,
) -> None:
    with ScriptedServer.from_fixture("review") as server:
        session = LLMSession.start({"detector": LLMSettings(model=MODEL, base_url=server.url)})
        try:
            defects = LLMReviewer(session, "review-env", LocalRuntime().sandbox).review(
                released.package
            )
        finally:
            session.close()
    assert [(d.code, d.owner) for d in defects] == [(DefectCode.ACCEPTS_SHORTCUT, "verifier")]
    assert defects[0].evidence["source"] == "llm_review"
    results = "\n".join(server.requests[-1].tool_results())
    assert "the quote does not occur in tests/verifier.json" in results


# ---- the rubric judge in a verification -------------------------------------------------
@pytest.fixture(scope="module")
def reference_workspace(released: Synthesized) -> Iterator[Path]:
    pkg = released.package
    with tempfile.TemporaryDirectory(prefix="cwg-test-ref-") as tmp:
        workspace = Path(tmp) / "ws"
        materialize(pkg, workspace)
        results = LocalRuntime().run_reference(pkg, workspace, "/app")
        assert results[-1].ok
        yield workspace


@pytest.mark.parametrize(
    ("script", "valid", "reward"),
    [("package", True, round(0.5**0.3, 6)), ("down", False, None)],
    ids=["judged", "judge-down"],
)
def test_a_judge_verdict_feeds_the_verification_and_a_failed_judge_makes_it_invalid(
    released: Synthesized,
    reference_workspace: Path,
    script: str,
    valid: bool,
    reward: float | None,
) -> None:
    server = ScriptedServer.from_fixture("judge", select={"judge": script})
    with server, openai.OpenAI(base_url=server.url, api_key="k", max_retries=0) as client:
        judge = RubricJudge(client, MODEL, max_attempts=2)
        outcome = judged_verification(
            LocalRuntime(), released.package, reference_workspace, "/app", judge
        )
    assert outcome.valid is valid
    assert outcome.reward == reward  # code 1.0 and rubric 0.5, geometric mean 0.7/0.3
    if not valid:
        assert outcome.error is not None and "rubric judge failed" in outcome.error


# ---- the command line -------------------------------------------------------------------
def test_synth_cli_runs_the_llm_backend(tmp_path: Path) -> None:
    spec_file = tmp_path / "iowa.yaml"
    spec_file.write_text(yaml.safe_dump(llm_spec().to_wire()))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    with ScriptedServer.from_fixture("build_ok") as server:
        argv = [sys.executable, "-m", "coworkgym", "synth", str(spec_file), "--out", str(out)]
        argv += ["--workers", "1", "--no-harbor-lint", "--backend", "llm"]
        argv += ["--base-url", server.url, "--model", MODEL]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=env,
            timeout=110,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert [r["name"] for r in records] == ["iowa"]
    assert records[0]["family"] == "llm"
