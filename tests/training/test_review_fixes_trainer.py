"""The trainer and selection after review: the loss is normalised by the step's global
target-token count (so workers with unequal tokens, and micro-batches, give the gradient of
one worker on the whole batch), FSDP runs the objectives' chunked LM head, tools recorded in
a trajectory are rendered when selecting and training, on-policy rounds keep the first
model as the KL reference and carry AdamW's state over, GRPO selection keeps or drops whole
groups, and GRPO data without a usable group is refused with the reason."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("ray", reason="needs the training extra: make install-training")

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from typer.testing import CliRunner

from coworkgym.cli import app
from coworkgym.rollout.reading import Record
from coworkgym.rollout.trajectory import Trajectory, write_jsonl
from coworkgym_training.objectives import ObjectiveConfig, build_objective, collate, group_key
from coworkgym_training.objectives import logprobs as logprobs_module
from coworkgym_training.objectives.config import ObjectiveName
from coworkgym_training.select import Candidate, select
from coworkgym_training.selection_run import Student, select_records
from coworkgym_training.trainer.accumulation import loss_scale, loss_units, micro_chunks
from coworkgym_training.trainer.checkpoint import TRAINER_STATE
from coworkgym_training.trainer.config import TrainConfig
from coworkgym_training.trainer.data import load_data
from coworkgym_training.trainer.loop import Worker
from coworkgym_training.trainer.metrics import read_log
from coworkgym_training.trainer.rounds import RoundsConfig, _round_train_config
from coworkgym_training.trainer.status import RunStatus, read_status
from tests.training import builders, objective_data
from tests.training import trajectories as make
from tests.training.trainer_runs import config, run_in_process, weights, workspace

WORLD = 2
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def uneven(root: Path, count: int = 2) -> Path:
    """root/model and root/data.jsonl: `count` graded rollouts of one package with clearly
    unequal agent token counts (the i-th final answer repeated 1 + 6·i times)."""
    builders.saved_student(root / "model")
    rows = []
    for sample in range(count):
        data = objective_data.rollout("only", sample, 1.0).model_dump(mode="json")
        data["messages"][5]["content"] = " ".join([make.FINAL] * (1 + 6 * sample))
        rows.append(Trajectory.model_validate(data))
    write_jsonl(root / "data.jsonl", rows)
    return root


# ---- 1. the loss is a mean over the step's global target tokens ----------------------------
def test_loss_scale_gives_unequal_workers_the_gradient_of_one_worker_on_the_whole_batch(
    tmp_path: Path,
) -> None:
    tokenizer = objective_data.tokenizer()
    model = objective_data.model(sharp=True)
    data = load_data(config(uneven(tmp_path)), [tmp_path / "data.jsonl"], tokenizer)
    objective: ObjectiveName = "sft"
    options = ObjectiveConfig()

    loss_of = build_objective(objective, options).loss
    pad = tokenizer.pad_token_id
    a, b = collate(data.examples[:1], pad), collate(data.examples[1:], pad)
    units_a, units_b = loss_units(objective, options, a), loss_units(objective, options, b)
    assert units_a != units_b  # the point: the workers' token counts differ
    total = units_a + units_b

    def grads(batch: Any, scale: float) -> list[torch.Tensor]:
        model.zero_grad(set_to_none=True)
        (loss_of(model, batch)[0] * scale).backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    # two workers, each its share scaled, then averaged as DDP / FSDP average gradients
    worker_a = grads(a, loss_scale(units_a, total, WORLD))
    worker_b = grads(b, loss_scale(units_b, total, WORLD))
    averaged = [(x + y) / WORLD for x, y in zip(worker_a, worker_b, strict=True)]
    whole = collate(data.examples, pad)
    one_worker = grads(whole, loss_scale(loss_units(objective, options, whole), total, 1))
    for got, want in zip(averaged, one_worker, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker(rank: int, payload: str, port: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=WORLD, init_method=f"tcp://127.0.0.1:{port}"
    )
    try:
        cfg = TrainConfig.model_validate_json(payload)
        Worker(cfg, list(cfg.data), rank, WORLD, torch.device("cpu"), report=lambda _: None).run()
    finally:
        dist.destroy_process_group()


def run_two_workers(cfg: TrainConfig) -> RunStatus:
    cfg.out.mkdir(parents=True, exist_ok=True)
    RunStatus(state="running", max_steps=cfg.max_steps, attempt=0).write(cfg.out)
    mp.start_processes(
        _worker, args=(cfg.model_dump_json(), free_port()), nprocs=WORLD, start_method="spawn"
    )
    status = read_status(cfg.out)
    assert status is not None
    return status


def assert_same_steps(got: Path, want: Path) -> None:
    """The same loss and gradient norm at every step, and the same final weights."""
    a, b = read_log(got), read_log(want)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for x, y in zip(a, b, strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-4)
        assert x["grad_norm"] == pytest.approx(y["grad_norm"], rel=1e-4)
        assert x["tokens"] == y["tokens"]
    final = read_status(got), read_status(want)
    assert final[0] is not None and final[1] is not None
    w1, w2 = weights(Path(final[0].checkpoint or "")), weights(Path(final[1].checkpoint or ""))
    for name in w2:
        torch.testing.assert_close(w1[name], w2[name], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_workers_with_unequal_tokens_step_as_one_worker_on_the_whole_batch(
    tmp_path: Path,
) -> None:
    root = uneven(tmp_path)
    common: dict[str, Any] = {"device": "cpu", "max_steps": 1, "checkpoint_every": 1}
    alone = run_in_process(config(root, out=root / "alone", **common))
    pair = run_two_workers(config(root, out=root / "pair", workers=WORLD, **common))
    assert alone.state == pair.state == "succeeded", pair.message
    assert_same_steps(root / "pair", root / "alone")


# ---- 2. micro-batches: gradient accumulation ----------------------------------------------
def test_micro_chunks_give_every_worker_the_same_number_of_micro_batches() -> None:
    assert micro_chunks([1, 2, 3], None, 3) == [[1, 2, 3]]
    assert micro_chunks([1, 2, 3], 2, 3) == [[1, 2], [3]]
    assert micro_chunks([1, 2], 1, 3) == [[1], [2], []]  # the largest share has 3
    assert micro_chunks([1, 2, 3, 4], 3, 4) == [[1, 2, 3], [4]]


@pytest.mark.parametrize("objective", ["sft", "grpo"])
def test_a_step_in_micro_batches_equals_the_step_on_the_whole_batch(
    tmp_path: Path, objective: str
) -> None:
    root = workspace(tmp_path)
    common: dict[str, Any] = {"objective": objective, "max_steps": 2, "checkpoint_every": 2}
    whole = run_in_process(config(root, out=root / "whole", hp={"batch_size": 4}, **common))
    micro = run_in_process(
        config(root, out=root / "micro", hp={"batch_size": 4, "micro_batch_size": 1}, **common)
    )
    assert whole.state == micro.state == "succeeded", micro.message
    assert_same_steps(root / "micro", root / "whole")


def test_cowork_gym_train_takes_micro_batch_size(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--objective",
            "sft",
            "--model",
            str(root / "model"),
            "--data",
            str(root / "data.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--max-steps",
            "1",
            "--micro-batch-size",
            "0",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "hyperparameters.micro_batch_size" in result.output


# ---- 3. FSDP runs the chunked LM head -----------------------------------------------------
def _no_full_logits(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the [B, T, V] logits were computed")


@pytest.mark.parametrize("objective", ["sft", "grpo"])
def test_fsdp_projects_only_the_target_states_through_the_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str
) -> None:
    root = workspace(tmp_path)
    baseline = run_in_process(config(root, objective=objective, out=root / "plain", max_steps=2))
    assert baseline.state == "succeeded"
    monkeypatch.setattr(logprobs_module, "_full_logits", _no_full_logits)
    dist.init_process_group(
        "gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{free_port()}"
    )
    try:
        sharded = run_in_process(
            config(root, objective=objective, out=root / "fsdp", strategy="fsdp", max_steps=2)
        )
    finally:
        dist.destroy_process_group()
    assert sharded.state == "succeeded", sharded.message
    assert_same_steps(root / "fsdp", root / "plain")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fsdp_with_micro_batches_and_uneven_shares_steps_as_one_worker(tmp_path: Path) -> None:
    """3 sequences over 2 workers in micro-batches of 1: one worker runs an empty (zero
    weight) micro-batch, so both run as many forward and backward passes as FSDP needs."""
    root = uneven(tmp_path, count=3)
    common: dict[str, Any] = {"device": "cpu", "max_steps": 2, "checkpoint_every": 2}
    alone = run_in_process(config(root, out=root / "alone", hp={"batch_size": 3}, **common))
    sharded = run_two_workers(
        config(
            root,
            out=root / "fsdp",
            workers=WORLD,
            strategy="fsdp",
            hp={"batch_size": 3, "micro_batch_size": 1},
            **common,
        )
    )
    assert alone.state == sharded.state == "succeeded", sharded.message
    assert_same_steps(root / "fsdp", root / "alone")


# ---- 4. the tools a trajectory records are rendered ---------------------------------------
def with_tools(trajectory: Trajectory) -> Trajectory:
    return trajectory.model_copy(update={"tools": TOOLS})


def test_selection_scores_a_trajectory_with_its_recorded_tools_in_the_prompt() -> None:
    tokenizer = objective_data.tokenizer()
    student = Student(objective_data.model(), tokenizer, "tiny", torch.device("cpu"))
    plain = objective_data.rollout("g", 0, 1.0)

    def report(trajectory: Trajectory) -> Any:
        record = Record(trajectory=trajectory, line=trajectory.model_dump_json(), where="x:1")
        return select_records([record], student, method="nll", keep=1.0, bins=1)[0]

    without, tooled = report(plain), report(with_tools(plain))
    rendered = tokenizer("Tools: " + json.dumps(TOOLS), add_special_tokens=False).input_ids
    grown = (tooled.trajectories[0].length or 0) - (without.trajectories[0].length or 0)
    assert grown >= len(rendered) // 2 > 0
    assert tooled.trajectories[0].nll != without.trajectories[0].nll


def test_training_examples_render_each_trajectorys_own_tools(tmp_path: Path) -> None:
    builders.saved_student(tmp_path / "model")
    plain = objective_data.rollout("g", 0, 1.0)
    write_jsonl(tmp_path / "data.jsonl", [with_tools(plain), objective_data.rollout("g", 1, 1.0)])
    tokenizer = objective_data.tokenizer()
    data = load_data(config(tmp_path), [tmp_path / "data.jsonl"], tokenizer)
    texts = [tokenizer.decode(e.input_ids) for e in data.examples]
    assert '"read_file"' in texts[0] and "Tools:" in texts[0]
    assert "Tools:" not in texts[1]  # per trajectory: the other was offered none


# ---- 5. rounds: a fixed KL reference, AdamW's state carried over --------------------------
def test_each_round_keeps_the_first_model_as_reference_and_the_last_optimizer_state(
    tmp_path: Path,
) -> None:
    base = TrainConfig(
        objective="grpo",
        model=tmp_path / "model",
        out=tmp_path / "loop",
        max_steps=2,
        objective_options=ObjectiveConfig.model_validate({"grpo": {"kl_beta": 0.04}}),
    )
    rounds = RoundsConfig(train=base, rounds=3, packages=["p"])
    first = _round_train_config(rounds, 0, base.model, tmp_path / "loop" / "round-000")
    assert first.reference_model == base.model and first.optimizer_state_from is None
    checkpoint = tmp_path / "loop" / "round-000" / "train" / "checkpoints" / "step-000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / TRAINER_STATE).write_bytes(b"")
    later = _round_train_config(rounds, 1, checkpoint, tmp_path / "loop" / "round-001")
    assert later.model == checkpoint
    assert later.reference_model == base.model  # not the round's starting checkpoint
    assert later.optimizer_state_from == checkpoint


def test_a_run_starts_from_another_checkpoints_optimizer_state(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    first = run_in_process(config(root, out=root / "r0", max_steps=2, checkpoint_every=2))
    assert first.state == "succeeded"
    previous = Path(first.checkpoint or "")
    carried = run_in_process(
        config(
            root,
            model=previous,
            out=root / "r1",
            max_steps=1,
            optimizer_state_from=previous,
        )
    )
    fresh = run_in_process(config(root, model=previous, out=root / "r1-fresh", max_steps=1))
    assert carried.state == fresh.state == "succeeded"

    def adam_steps(checkpoint: str | None) -> set[float]:
        state = torch.load(Path(checkpoint or "") / TRAINER_STATE, weights_only=False)
        return {float(s["step"]) for s in state["optimizer"]["state"].values()}

    assert adam_steps(carried.checkpoint) == {3.0}  # 2 steps of round 0, then one more
    assert adam_steps(fresh.checkpoint) == {1.0}
    assert carried.step == 1  # the run's own step count starts at 0


# ---- 6. GRPO selection keeps whole groups -------------------------------------------------
def grouped_candidates() -> list[Candidate]:
    out = []
    for g in range(6):
        for s in range(3):
            out.append(
                Candidate(
                    f"t{g}-{s}",
                    length=100 * g + s,
                    nll=1.0 + 0.1 * g + 0.05 * s,
                    rsr=float(g + s),
                    group=f"g{g}",
                )
            )
    return out


@pytest.mark.parametrize("method", ["nll", "rsr"])
def test_selection_by_group_keeps_or_drops_whole_groups(method: Any) -> None:
    candidates = grouped_candidates()
    decisions = select(candidates, method=method, keep=0.5, bins=2, by_group=True)
    kept: dict[str, int] = {}
    seen: dict[str, set[bool]] = {}
    for d in decisions:
        group = d.candidate.group or ""
        seen.setdefault(group, set()).add(d.kept)
        kept[group] = kept.get(group, 0) + d.kept
    assert all(len(flags) == 1 for flags in seen.values())  # whole groups
    assert sorted(n for n in kept.values() if n) == [3, 3, 3, 3]  # 2 of 3 per bin, whole
    # while per trajectory the same budget cuts groups apart (nll leaves groups of one)
    apart = select(candidates, method=method, keep=0.5, bins=2)
    counts: dict[str, int] = {}
    for d in apart:
        counts[d.candidate.group or ""] = counts.get(d.candidate.group or "", 0) + d.kept
    assert any(0 < n < 3 for n in counts.values())


def test_group_selection_drops_singleton_groups_before_binning() -> None:
    candidates = [*grouped_candidates(), Candidate("lone", 5, 1.0, 1.0, group="alone")]
    decisions = {
        d.candidate.id: d for d in select(candidates, method="nll", keep=1.0, bins=2, by_group=True)
    }
    assert not decisions["lone"].kept and decisions["lone"].bin is None


def test_select_records_by_group_leaves_no_singleton_group() -> None:
    tokenizer = objective_data.tokenizer()
    student = Student(objective_data.model(), tokenizer, "tiny", torch.device("cpu"))
    rewards: dict[str, list[float | None]] = {n: [1.0, 0.0, 0.5] for n in ("a", "b", "c", "d")}
    trajectories = objective_data.graded({**rewards, "solo": [1.0]})
    records = [
        Record(trajectory=t, line=t.model_dump_json() + "\n", where=f"d:{i}")
        for i, t in enumerate(trajectories)
    ]
    report, kept = select_records(records, student, method="nll", keep=0.5, bins=2, by_group=True)
    groups: dict[str, int] = {}
    for record in kept:
        groups[group_key(record.trajectory)] = groups.get(group_key(record.trajectory), 0) + 1
    assert groups and all(n == 3 for n in groups.values())
    assert report.by_group
    solo = next(v for v in report.trajectories if v.where == f"d:{len(trajectories) - 1}")
    assert not solo.kept and solo.reason is not None and "singleton" in solo.reason


# ---- 7. GRPO data without a usable group is refused with the reason -----------------------
def test_grpo_without_a_usable_group_says_why_and_how_to_fix_it(tmp_path: Path) -> None:
    root = workspace(tmp_path, groups={"flat": [0.5, 0.5], "lone": [1.0], "other": [0.2]})
    status = run_in_process(config(root, objective="grpo"))
    assert (status.state, status.reason) == ("failed", "no_examples")
    message = status.message
    assert "GRPO" in message and "--samples" in message  # what is wrong, and the fix
    assert "2 singleton" in message and "1 zero-variance" in message
