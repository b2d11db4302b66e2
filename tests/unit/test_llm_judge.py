"""The rubric judge over real HTTP (scripted answers from tests/fixtures/llm/judge.json):
structured output against a schema, evidence in the prompt, retries on malformed answers,
the fallback for servers without response_format, k-sample majority/mean, and a failure
that is *invalid* rather than 0."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from coworkgym.llm.errors import JudgeError
from coworkgym.llm.judge import RubricJudge, parse_verdict, render
from coworkgym.verifier.spec import RubricItem
from tests.fixtures.llm.server import ScriptedServer

pytestmark = pytest.mark.timeout(30)
RUBRIC = [
    RubricItem(
        id="readable_totals",
        criterion="totals.csv reads well: a header row, one row per source.",
        evidence_paths=["totals.csv"],
    ),
    RubricItem(
        id="largest_named",
        weight=2,
        criterion="summary.json names the largest source by its full name.",
        evidence_paths=["summary.json"],
    ),
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "totals.csv").write_text("source,total_generation\nFossil Fuels,620129\n")
    (tmp_path / "summary.json").write_text('{"largest_source": "Fossil Fuels"}\n')
    return tmp_path


@contextmanager
def judge_for(script: str, **options: Any) -> Iterator[tuple[RubricJudge, ScriptedServer]]:
    server = ScriptedServer.from_fixture("judge", select={"judge": script})
    with server, openai.OpenAI(base_url=server.url, api_key="k", max_retries=0) as client:
        yield RubricJudge(client, "judge-model", **options), server


def test_structured_output_per_item_scores_with_evidence(workspace: Path) -> None:
    with judge_for("structured") as (judge, server):
        judgement = judge.judge(RUBRIC, workspace, "Sum the generation per source.")
    assert judgement.scores == {"readable_totals": 1.0, "largest_named": 0.5}
    assert judgement.rationale("largest_named") == ["largest_named judged"]
    (request,) = server.requests
    body = request.body
    assert body["temperature"] == 0.0
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    item = schema["schema"]["properties"]["items"]["items"]
    assert item["properties"]["id"]["enum"] == ["readable_totals", "largest_named"]
    assert item["required"] == ["id", "score", "rationale", "evidence"]
    prompt = body["messages"][1]["content"]
    assert "Sum the generation per source." in prompt
    assert "=== totals.csv ===\nsource,total_generation\nFossil Fuels,620129" in prompt
    assert '"largest_source": "Fossil Fuels"' in prompt


def test_malformed_answers_are_retried_with_the_problem_stated(workspace: Path) -> None:
    with judge_for("retries", max_attempts=3) as (judge, server):
        judgement = judge.judge(RUBRIC, workspace, "task")
    assert judgement.scores == {"readable_totals": 1.0, "largest_named": 0.5}
    assert judgement.attempts == 3
    corrections = [m["content"] for m in server.requests[-1].messages if m["role"] == "user"][1:]
    assert "not JSON" in corrections[0]
    assert "items missing ['largest_named']" in corrections[1]


def test_a_judge_that_never_answers_validly_is_invalid_not_zero(workspace: Path) -> None:
    invalid = pytest.raises(JudgeError, match="0 of 1 judge samples valid")
    with judge_for("invalid", max_attempts=3) as (judge, _), invalid:
        judge.judge(RUBRIC, workspace, "task")
    with judge_for("down", max_attempts=2) as (judge, _):
        assert judge.scores(RUBRIC, workspace, "task") is None  # API errors: invalid too


def test_a_server_without_response_format_gets_plain_json_parsed(workspace: Path) -> None:
    with judge_for("fallback") as (judge, server):
        judgement = judge.judge(RUBRIC, workspace, "task")
    assert judgement.scores == {"readable_totals": 1.0, "largest_named": 0.5}
    first, second = server.requests
    assert "response_format" in first.body and "response_format" not in second.body
    assert not judge.structured  # remembered for the next verdict


@pytest.mark.parametrize(
    ("combine", "expected"),
    [
        ("majority", {"readable_totals": 1.0, "largest_named": 0.0}),
        (
            "mean",
            {"readable_totals": pytest.approx(2.5 / 3), "largest_named": pytest.approx(1 / 3)},
        ),
    ],
)
def test_k_samples_are_combined(workspace: Path, combine: str, expected: dict[str, Any]) -> None:
    with judge_for("majority", samples=3, combine=combine) as (judge, server):
        judgement = judge.judge(RUBRIC, workspace, "task")
    assert judgement.scores == expected
    assert len(judgement.samples) == 3 and len(server.requests) == 3


def test_an_empty_rubric_needs_no_model(workspace: Path) -> None:
    with judge_for("down") as (judge, server):
        assert judge.judge([], workspace, "task").scores == {}
    assert server.requests == []


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ('{"items": [{"id": "a", "score": 1.5, "rationale": "r", "evidence": ["q"]}]}', "score"),
        ('{"items": [{"id": "a", "score": 1, "rationale": "r", "evidence": []}]}', "evidence"),
        ('{"items": [{"id": "b", "score": 1, "rationale": "r", "evidence": ["q"]}]}', "unknown"),
        ('{"items": [{"id": "a", "score": 1, "rationale": "r", "evidence": ["q"]}], "x": 1}', "x"),
        ("Sure! Here you go: {", "not JSON"),
    ],
)
def test_parse_verdict_names_what_is_wrong(answer: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_verdict(answer, ["a"])


def test_evidence_rendering_never_follows_a_symlink_out(tmp_path: Path) -> None:
    (tmp_path / "link.txt").symlink_to("/etc/passwd")
    assert render(tmp_path, "link.txt", 1000) == "(missing)"
    assert render(tmp_path, "../outside.txt", 1000) == "(missing)"
    (tmp_path / "big.md").write_text("x" * 50)
    assert render(tmp_path, "big.md", 10).startswith("x" * 10 + "\n… [40 more chars]")
