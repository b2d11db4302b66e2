"""The training run's configuration: the one source of truth for `cowork-gym train`, the
Ray workers and (through its JSON form) the TrainingRun controller's pods.

Everything a run needs is in ``TrainConfig``; it is written to ``OUT/config.json`` at the
start, so a run can be read back (and re-run) from its own folder. Paths are made absolute
when the config is built, because Ray workers do not share the driver's working directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..objectives.config import ObjectiveConfig, ObjectiveName

Objective = ObjectiveName
Strategy = Literal["replicated", "fsdp"]
Device = Literal["auto", "cpu", "cuda"]
SelectionMethod = Literal["nll", "rsr"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Selection(_Config):
    """Model-conditioned selection (``cowork-gym select``) applied to the data before
    training, under the starting model; see docs/training.md."""

    method: SelectionMethod = "nll"
    keep: float = Field(0.7, gt=0.0, le=1.0, description="the fraction each length bin keeps")
    bins: int = Field(5, ge=1, description="equal-frequency length bins")
    by_group: bool | None = Field(
        None,
        description="keep or drop whole GRPO groups (scored by their members' mean, "
        "singleton groups dropped) instead of single trajectories; None: on for the grpo "
        "objective, off otherwise",
    )

    def groups_for(self, objective: ObjectiveName) -> bool:
        return objective == "grpo" if self.by_group is None else self.by_group


class Hyperparameters(_Config):
    learning_rate: float = Field(1e-5, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    warmup_steps: int = Field(0, ge=0, description="linear warm-up, then constant")
    batch_size: int = Field(
        8, ge=1, description="sequences per optimizer step, summed over the workers"
    )
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        description="sequences per forward and backward on each worker: a worker's share "
        "of the step is split into micro-batches whose gradients accumulate before the "
        "optimizer step (the loss normalised by the step's global target-token count, so "
        "the step is the one over the whole batch); None: the whole share at once",
    )
    max_grad_norm: float = Field(1.0, gt=0.0, description="gradients clipped to this norm")
    seed: int = Field(0, description="the data order and the initial RNG state")
    gradient_checkpointing: bool = Field(
        False,
        description="recompute each layer's activations in the backward pass: a rollout's "
        "thousands of tokens through every layer no longer sit in memory at once",
    )


class TrainConfig(_Config):
    objective: Objective
    model: Path = Field(description="the starting weights: a local Hugging Face model folder")
    data: list[Path] = Field(
        default_factory=list,
        description="trajectory JSONL files or folders of them (an on-policy run's rounds "
        "fill it with their own rollouts)",
    )
    out: Path = Field(description="this run's folder: config, metrics log, status")
    checkpoint: str | None = Field(
        None,
        description="where checkpoints go: a folder or s3://bucket/prefix "
        "(default OUT/checkpoints); a run resumes from the latest one found there",
    )
    selection: Selection | None = None
    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)
    objective_options: ObjectiveConfig = Field(
        default_factory=ObjectiveConfig,
        description="the objective's own settings (temperature, GRPO clip range and KL "
        "weight, OPD top-k, MoE router): coworkgym_training.objectives.ObjectiveConfig",
    )
    max_steps: int = Field(ge=1, description="optimizer steps in all (a resumed run counts on)")
    checkpoint_every: int = Field(10, ge=1, description="steps between checkpoints")
    keep_checkpoints: int = Field(2, ge=1, description="how many recent checkpoints to keep")
    workers: int = Field(1, ge=1, description="Ray Train workers (one process each)")
    device: Device = Field("auto", description="cuda when available with auto")
    strategy: Strategy = Field(
        "replicated",
        description="replicated: every worker holds the model, gradients are averaged; "
        "fsdp: parameters sharded across the workers (torch FSDP2; meant for GPUs, runs "
        "on CPU with gloo too)",
    )
    max_failures: int = Field(
        2, ge=0, description="worker-group restarts (from the last checkpoint) before failing"
    )
    reference_model: Path | None = Field(
        None, description="GRPO's KL reference (default: the starting model, `model`)"
    )
    optimizer_state_from: Path | None = Field(
        None,
        description="a checkpoint folder whose trainer_state.pt (AdamW's moments and the "
        "learning-rate schedule, not its step count) a run without a checkpoint of its own "
        "starts from: an on-policy round continues the previous round's optimizer",
    )
    teacher_model: Path | None = Field(None, description="OPD's teacher (required for opd)")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="serve Prometheus metrics on 127.0.0.1:PORT"
    )
    object_store_mb: int = Field(128, ge=80, description="Ray's object store (unused by data)")

    @field_validator("model", "out", "reference_model", "teacher_model", "optimizer_state_from")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return value.expanduser().absolute() if value is not None else None

    @field_validator("data")
    @classmethod
    def _absolute_data(cls, value: list[Path]) -> list[Path]:
        return [p.expanduser().absolute() for p in value]

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint_target(cls, value: str | None) -> str | None:
        if value is None or value.startswith("s3://"):
            if value is not None and not value.removeprefix("s3://").split("/")[0]:
                raise ValueError(f"checkpoint {value!r}: an s3:// URI needs a bucket")
            return value
        return str(Path(value).expanduser().absolute())

    @model_validator(mode="after")
    def _objective_needs(self) -> TrainConfig:
        if self.objective == "opd" and self.teacher_model is None:
            raise ValueError("objective opd needs teacher_model (the teacher's model folder)")
        if self.hyperparameters.batch_size < self.workers:
            raise ValueError(
                f"hyperparameters.batch_size {self.hyperparameters.batch_size} is below "
                f"workers {self.workers}: every worker needs at least one sequence per step"
            )
        return self

    @property
    def checkpoint_target(self) -> str:
        return self.checkpoint or str(self.out / "checkpoints")

    def use_gpu(self, cuda_available: bool) -> bool:
        return self.device == "cuda" or (self.device == "auto" and cuda_available)


__all__ = ["Hyperparameters", "Objective", "Selection", "Strategy", "TrainConfig"]
