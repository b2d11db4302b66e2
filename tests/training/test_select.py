"""Selection: NLL and RSR as defined in docs/training.md, equal-frequency length bins, the
retention budget (NLL central, RSR lowest), and `cowork-gym select` end to end with a tiny
random student saved to a folder."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

import torch
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.rollout.trajectory import dump_line
from coworkgym_training.score import score_trajectory
from coworkgym_training.select import Candidate, kept_count, length_bins, select
from coworkgym_training.tokenize import TokenizedTrajectory, tokenize_trajectory
from tests.fixtures.trajectories import solved
from tests.training import builders
from tests.training import trajectories as make


def candidates(scores: list[float], length: int = 10) -> list[Candidate]:
    return [Candidate(f"t{i:02d}", length, s, s) for i, s in enumerate(scores)]


# ---- bins and budget ------------------------------------------------------------------
def test_bins_are_equal_frequency_by_length() -> None:
    pool = [Candidate(f"t{i}", length, 1.0, 1.0) for i, length in enumerate([9, 1, 5, 7, 3, 2, 8])]
    bins = length_bins(pool, 3)
    assert [[c.length for c in b] for b in bins] == [[1, 2], [3, 5], [7, 8, 9]]
    assert len(length_bins(pool[:2], 5)) == 2  # never an empty bin


@pytest.mark.parametrize(("size", "expected"), [(10, 7), (5, 4), (3, 2), (1, 1), (2, 1)])
def test_each_bin_keeps_the_budget_rounded_half_up(size: int, expected: int) -> None:
    assert kept_count(size, 0.7) == expected


def test_nll_keeps_the_central_fraction_and_rsr_the_lowest() -> None:
    pool = candidates([float(s) for s in range(10)])  # t00 has the lowest score
    nll = {d.candidate.id for d in select(pool, method="nll", keep=0.6, bins=1) if d.kept}
    assert nll == {f"t0{i}" for i in range(2, 8)}  # two dropped at each end
    rsr = {d.candidate.id for d in select(pool, method="rsr", keep=0.6, bins=1) if d.kept}
    assert rsr == {f"t0{i}" for i in range(6)}
    odd = {d.candidate.id for d in select(pool, method="nll", keep=0.7, bins=1) if d.kept}
    assert odd == {f"t0{i}" for i in range(1, 8)}  # 3 dropped: one low, two high


def test_selection_happens_inside_each_bin() -> None:
    short = [Candidate(f"s{i}", 10 + i, nll=10.0 + i, rsr=10.0 + i) for i in range(4)]
    long = [Candidate(f"l{i}", 100 + i, nll=0.1 * i, rsr=0.1 * i) for i in range(4)]
    decisions = select(short + long, method="rsr", keep=0.5, bins=2)
    # Globally the long ones all score lower; per bin, each keeps its own lowest two.
    assert {d.candidate.id for d in decisions if d.kept} == {"s0", "s1", "l0", "l1"}
    assert [d.bin for d in decisions] == [0] * 4 + [1] * 4


def test_the_budget_and_ids_are_checked() -> None:
    with pytest.raises(ValueError, match="keep must be a fraction"):
        select(candidates([1.0]), method="nll", keep=0.0, bins=1)
    with pytest.raises(ValueError, match="ids repeat"):
        select(candidates([1.0]) * 2, method="nll", keep=0.5, bins=1)


# ---- the scores -----------------------------------------------------------------------
class FixedLogits(torch.nn.Module):
    """A 'model' whose next-token logits are the same table row at every position."""

    def __init__(self, row: list[float]) -> None:
        super().__init__()
        self.row = torch.tensor(row)

    def forward(self, input_ids: Any, logits_to_keep: Any = None) -> Any:
        length = input_ids.shape[1] if logits_to_keep is None else len(logits_to_keep)
        return SimpleNamespace(logits=self.row.expand(1, length, -1))


def sequence(targets: list[int]) -> TokenizedTrajectory:
    ids = [0, *targets]
    mask = [False] + [True] * len(targets)
    return TokenizedTrajectory("t", ids, mask, [None] * len(ids))


def test_rank_is_one_for_the_students_top_token_and_clipped_at_r_max() -> None:
    row = [4.0, 3.0, 2.0, 1.0, 0.0]  # token 0 is the top choice, token 4 ranks fifth
    model = FixedLogits(row)
    log_probs = torch.log_softmax(torch.tensor(row), -1)
    score = score_trajectory(model, sequence([0, 4]), rank_clip=3)
    assert score is not None
    nll = -float(log_probs[0] + log_probs[4]) / 2
    assert score.nll == pytest.approx(nll)
    assert score.clipped_rank_sum == 1 + 3  # rank 5 clipped to 3
    assert score.mean_rank == 3.0
    assert score.rsr == pytest.approx(4 / (2 * nll))


def test_scores_match_a_direct_computation_under_a_tiny_llama() -> None:
    tokenizer = builders.tokenizer("chatml")
    model = builders.tiny_model(len(tokenizer))
    tokenized = tokenize_trajectory(make.two_turns(), tokenizer)
    score = score_trajectory(model, tokenized, rank_clip=50)
    assert score is not None

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([tokenized.input_ids])).logits[0]
    positions = [t for t, on in enumerate(tokenized.agent_mask) if on]
    log_probs = torch.log_softmax(logits.float(), -1)
    token_lp = [float(log_probs[t - 1, tokenized.input_ids[t]]) for t in positions]
    ranks = [
        1 + int((logits[t - 1] > logits[t - 1, tokenized.input_ids[t]]).sum()) for t in positions
    ]
    nll = -sum(token_lp) / len(positions)
    assert score.scored_tokens == tokenized.agent_tokens == len(positions)
    assert score.nll == pytest.approx(nll, rel=1e-4)
    assert score.rsr == pytest.approx(sum(min(r, 50) for r in ranks) / (len(ranks) * nll), rel=1e-4)


def test_a_trajectory_without_agent_tokens_has_no_score() -> None:
    model = FixedLogits([1.0, 0.0])
    empty = TokenizedTrajectory("t", [0, 1], [False, False], [None, None])
    assert score_trajectory(model, empty) is None


# ---- cowork-gym select ---------------------------------------------------------------
@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.saved_student(tmp_path_factory.mktemp("student"))


def pool_file(folder: Path) -> Path:
    path = folder / "trajectories.jsonl"
    lines = [dump_line(solved(steps=2 + i % 5, sample=i, with_tokens=False)) for i in range(10)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("method", ["nll", "rsr"])
def test_select_writes_the_kept_set_and_a_report(
    method: str, student: Path, tmp_path: Path
) -> None:
    pool = pool_file(tmp_path)
    kept_path, report_dir = tmp_path / "kept.jsonl", tmp_path / "report"
    result = CliRunner().invoke(
        app,
        [
            "select", str(pool), "--model", str(student), "--method", method, "--keep", "0.7",
            "--bins", "2", "--out", str(kept_path), "--report", str(report_dir),
            # rsr bins by tool steps (2–6 here), nll by rendered tokens
            "--length-by", "steps" if method == "rsr" else "tokens",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((report_dir / "selection.json").read_text())
    assert report["schema_version"] == "cowork-gym.selection/v1"
    assert [(b["entered"], b["kept"]) for b in report["bins"]] == [(5, 4), (5, 4)]
    assert report["kept"] == 8 and report["dropped"] == 2
    lengths = sorted(t["length"] for t in report["trajectories"])
    assert (lengths == sorted([2 + i % 5 for i in range(10)])) is (method == "rsr")
    # Kept lines are the input's own, byte for byte and in input order.
    inputs = pool.read_text().splitlines(keepends=True)
    kept = kept_path.read_text().splitlines(keepends=True)
    assert kept == [line for line in inputs if line in kept]
    kept_ids = {json.loads(line)["key"]["sample"] for line in kept}
    assert kept_ids == {
        int(t["where"].rsplit(":", 1)[1]) - 1 for t in report["trajectories"] if t["kept"]
    }
    assert all(math.isfinite(t[method]) for t in report["trajectories"])
    assert (report_dir / "selection.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "kept" in result.output and f"selection by {method.upper()}" in result.output


def test_select_refuses_a_model_path_that_is_not_a_model_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["select", str(pool_file(tmp_path)), "--model", str(tmp_path), "--out", "k.jsonl"],
    )
    assert result.exit_code == 2
    assert "not a model folder" in " ".join(result.output.split())
