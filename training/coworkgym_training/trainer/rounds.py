"""The on-policy loop: serve the current checkpoint, roll out against it, train on those
rollouts, and go on from the new checkpoint.

    round r:  checkpoint_r ──ChatServer (127.0.0.1)──▶ RolloutBatch (packages × samples,
              tool-calling harness through the LLM gateway) ──▶ OUT/round-r/rollouts/
              ──train (grpo | opd, Ray Train)──▶ OUT/round-r/train/checkpoints/ = checkpoint_r+1

Each round's rollouts carry the served model's name (``<name>@round-r``), so their GRPO
groups never mix rounds. Every round is one stretch of the same optimisation: its KL
reference stays round 0's model (``train.reference_model``, else ``train.model``), not
the checkpoint the round starts from, and its AdamW moments and learning-rate schedule
continue from the previous trained round's checkpoint (its ``trainer_state.pt``). A round
whose rollouts give no example (e.g. GRPO groups all without reward variance) is recorded
as ``skipped`` and the next round serves the same checkpoint again. ``OUT/rounds.json``
says what each round served, rolled out and saved; a re-run skips the rounds that finished
(their status.json says succeeded) and the rollout store skips rollouts already stored, so
a stopped loop resumes.

GPU clusters serve with vLLM instead of ``ChatServer``; the hand-offs are the same files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import TrainConfig
from .metrics import METRICS_LOG, read_log
from .status import RunStatus, read_status
from .store import S3CheckpointStore

ROUNDS = "rounds.json"
RoundState = Literal["trained", "skipped", "failed"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RolloutSettings(_Config):
    harness: str = "tool-calling"
    samples: int = Field(4, ge=1, description="rollouts per package: the GRPO group size")
    max_steps: int = Field(8, ge=1, description="model calls per rollout")
    max_tokens: int = Field(256, ge=1, description="tokens per model call")
    temperature: float = Field(1.0, ge=0.0)
    timeout_s: float = Field(600.0, gt=0, description="wall-clock limit per rollout")
    workers: int = Field(2, ge=1, description="rollouts at once")
    seed: int | None = Field(0, description="sampling seed (+ the sample number)")
    sandbox: Literal["bwrap", "direct"] = Field(
        "bwrap",
        description="where the agent's and the verifier's commands run: bwrap (a bubblewrap "
        "sandbox per command) or direct (plain subprocesses: for a pod that is the sandbox "
        "itself and cannot create user namespaces; nothing isolates the commands from the "
        "pod's own files and processes then)",
    )


class RoundsConfig(_Config):
    train: TrainConfig = Field(
        description="the training of each round: model is round 0's, out the loop's "
        "folder, max_steps the steps of each round; data is filled per round"
    )
    rounds: int = Field(ge=1)
    packages: list[str] = Field(
        min_length=1, description="environment packages to roll out (as `rollout` takes)"
    )
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    serve_device: str = Field("cpu", description="where the checkpoint is served from")


class RoundRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    round: int
    state: RoundState
    served: str = Field(description="the checkpoint folder the round served")
    served_as: str = Field(description="the model name in its trajectories")
    rollouts: str
    trajectories: int
    valid: int
    with_token_ids: int = Field(description="agent messages whose token ids were recorded")
    reward_mean: float | None
    checkpoint: str | None = Field(None, description="the round's last checkpoint")
    train_status: RunStatus | None = None


@dataclass(frozen=True)
class RoundsOutcome:
    status: RunStatus
    rounds: list[RoundRecord]


def served_name(config: RoundsConfig, round_index: int) -> str:
    return f"{config.train.model.name}@round-{round_index}"


def run_rounds(config: RoundsConfig, progress: Any = None) -> RoundsOutcome:
    import torch

    from .run import start_ray

    out = config.train.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "rounds-config.json").write_text(config.model_dump_json(indent=2) + "\n")
    use_gpu = config.train.use_gpu(torch.cuda.is_available())
    started = start_ray(config.train, gpus=config.train.workers if use_gpu else 0)
    records: list[RoundRecord] = []
    model = config.train.model
    try:
        for index in range(config.rounds):
            record = _round(config, index, model, progress)
            records.append(record)
            _write(config, records)
            if record.state == "failed":
                break
            if record.state == "trained" and record.checkpoint is not None:
                model = _local_checkpoint(config, index, record.checkpoint)
    finally:
        if started:
            import ray

            ray.shutdown()
    return RoundsOutcome(status=_overall(config, records), rounds=records)


def _round(config: RoundsConfig, index: int, model: Path, progress: Any) -> RoundRecord:
    folder = config.train.out / f"round-{index:03d}"
    train_config = _round_train_config(config, index, model, folder)
    done = read_status(train_config.out)
    rollouts = folder / "rollouts"
    if done is not None and done.state == "succeeded":  # a re-run: this round is done
        return _record(config, index, model, rollouts, "trained", done)
    _say(progress, f"round {index}: serving {model} as {served_name(config, index)}")
    _roll_out(config, index, model, rollouts)
    _say(progress, f"round {index}: training {config.train.objective} on {rollouts}")
    from .run import train

    status = train(train_config).status
    if status.state == "succeeded":
        return _record(config, index, model, rollouts, "trained", status)
    state: RoundState = "skipped" if status.reason == "no_examples" else "failed"
    return _record(config, index, model, rollouts, state, status)


def _round_train_config(
    config: RoundsConfig, index: int, model: Path, folder: Path
) -> TrainConfig:
    from .checkpoint import TRAINER_STATE

    base = config.train
    checkpoint = None
    if base.checkpoint is not None:
        checkpoint = f"{base.checkpoint.rstrip('/')}/round-{index:03d}"
    fields = base.model_dump(mode="json")
    # The starting checkpoint of a later round is the previous round's: its optimizer state
    # carries over, while the KL reference stays the first model whatever round this is.
    carried = base.optimizer_state_from
    if model != base.model:
        carried = model if (model / TRAINER_STATE).is_file() else None
    fields.update(
        model=str(model),
        reference_model=str(base.reference_model or base.model),
        optimizer_state_from=str(carried) if carried is not None else None,
        data=[str(folder / "rollouts")],
        out=str(folder / "train"),
        checkpoint=checkpoint,
        metrics_port=None if index else base.metrics_port,
    )
    return TrainConfig.model_validate(fields)


def _roll_out(config: RoundsConfig, index: int, model: Path, rollouts: Path) -> None:
    from coworkgym.rollout.batch import RolloutBatch, find_packages, store_for
    from coworkgym.rollout.engine import RolloutEngine, RolloutLimits
    from coworkgym.rollout.harness import PolicyConfig
    from coworkgym.sandbox.direct import DirectSandbox

    from ..serving import ChatServer

    settings = config.rollout
    sources = find_packages(config.packages)
    name = served_name(config, index)
    limits = RolloutLimits(timeout_s=settings.timeout_s)
    sandbox = DirectSandbox() if settings.sandbox == "direct" else None  # None: bwrap
    with (
        ChatServer(model, model_name=name, device=config.serve_device) as server,
        RolloutEngine(sandbox=sandbox, limits=limits) as engine,
    ):
        policy = PolicyConfig(
            model=name,
            base_url=server.url,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_steps=settings.max_steps,
            seed=None if settings.seed is None else settings.seed + 1000 * index,
        )
        batch = RolloutBatch(engine, store_for(str(rollouts)), policy, workers=settings.workers)
        batch.run(batch.jobs(sources, [settings.harness], settings.samples))


def _record(
    config: RoundsConfig,
    index: int,
    model: Path,
    rollouts: Path,
    state: RoundState,
    status: RunStatus,
) -> RoundRecord:
    from coworkgym.rollout.batch import store_for

    trajectories = store_for(str(rollouts)).load()
    rewards = [t.reward for t in trajectories if t.reward is not None]
    return RoundRecord(
        round=index,
        state=state,
        served=str(model),
        served_as=served_name(config, index),
        rollouts=str(rollouts / "trajectories.jsonl"),
        trajectories=len(trajectories),
        valid=len(rewards),
        with_token_ids=sum(
            1 for t in trajectories for m in t.agent_messages() if m.tokens is not None
        ),
        reward_mean=sum(rewards) / len(rewards) if rewards else None,
        checkpoint=status.checkpoint if state == "trained" else None,
        train_status=status,
    )


def _local_checkpoint(config: RoundsConfig, index: int, uri: str) -> Path:
    """The round's checkpoint as a folder to serve and train from (fetched from S3)."""
    if not uri.startswith("s3://"):
        return Path(uri)
    prefix, name = uri.rstrip("/").rsplit("/", 1)
    target = config.train.out / f"round-{index:03d}" / "model"
    return S3CheckpointStore(prefix).fetch(int(name.removeprefix("step-")), target)


def _overall(config: RoundsConfig, records: list[RoundRecord]) -> RunStatus:
    total = config.rounds * config.train.max_steps
    trained = [r for r in records if r.state == "trained"]
    last = trained[-1] if trained else None
    done_steps = sum(r.train_status.step for r in trained if r.train_status is not None)
    base = {"max_steps": total, "step": done_steps, "checkpoint": last.checkpoint if last else None}
    failed = next((r for r in records if r.state == "failed"), None)
    if failed is not None and failed.train_status is not None:
        return RunStatus(
            state="failed",
            reason=failed.train_status.reason,
            message=f"round {failed.round}: {failed.train_status.message}",
            **base,
        )
    if not trained:
        return RunStatus(
            state="failed",
            reason="no_examples",
            message=f"no round of {len(records)} had an example to train on",
            **base,
        )
    skipped = sum(r.state == "skipped" for r in records)
    return RunStatus(
        state="succeeded",
        message=f"{len(trained)} rounds trained, {skipped} skipped (no example)",
        **base,
    )


def _write(config: RoundsConfig, records: list[RoundRecord]) -> None:
    """rounds.json, and the loop as one run for whoever follows OUT/status.json and
    OUT/metrics.jsonl (the TrainingRun pod): every round's step records in order, with
    ``round`` and ``step`` counted over the whole loop."""
    out = config.train.out
    payload = {"rounds": [r.model_dump(mode="json") for r in records]}
    (out / ROUNDS).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    lines = []
    offset = 0
    for record in records:
        steps = read_log(out / f"round-{record.round:03d}" / "train")
        for line in steps:
            if isinstance(line.get("step"), int):
                lines.append({**line, "round": record.round, "step": offset + line["step"]})
        offset += config.train.max_steps
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (out / METRICS_LOG).write_text(text, encoding="utf-8")
    status = _overall(config, records)
    if len(records) < config.rounds and status.state == "succeeded":
        status = status.model_copy(update={"state": "running"})
    status.write(out)


def _say(progress: Any, text: str) -> None:
    if progress is not None:
        progress.print(text)


__all__ = [
    "ROUNDS",
    "RolloutSettings",
    "RoundRecord",
    "RoundsConfig",
    "RoundsOutcome",
    "run_rounds",
]
