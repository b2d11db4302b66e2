"""One Ray Train worker's training loop (``TorchTrainer``'s ``train_loop_per_worker``).

    resume: the store's latest checkpoint (weights, optimizer, step), else the base model
    for step in last + 1 … max_steps:
        this worker's share of the step's batch, in micro-batches → objective loss of each,
        scaled by its share of the step's global target count (see ``accumulation``) →
        backward, gradients accumulating
        a non-finite loss on any worker → the run fails here (nothing stepped or saved)
        gradients averaged (replicated) or reduce-scattered (FSDP) → clip → step
        metrics reduced over the workers → rank 0 logs them (JSONL, Prometheus)
        every checkpoint_every steps and at the end: a checkpoint
    rank 0 writes status.json all along

A worker that dies makes Ray Train restart the whole group (``FailureConfig``); the new
group starts at the top and resumes from the latest checkpoint, so the steps after it are
done again and the run still ends at ``max_steps``.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from ..chat_format import with_tool_format
from ..objectives import Objective, ObjectiveError, build_objective, collate
from ..objectives.batching import Batch
from ..objectives.examples import PrepReport
from .accumulation import loss_scale, loss_units, micro_chunks
from .checkpoint import restore_trainer_state, save_checkpoint
from .config import TrainConfig
from .data import RunData, load_data, step_batch, worker_share
from .distributed import (
    all_agree,
    average_gradients,
    barrier,
    reduce_sums,
    shard_fsdp,
)
from .metrics import MetricsSink
from .status import FailureReason, RunStatus, State, read_status
from .store import CheckpointStore, store_for

WORKERS_DIR = "workers"  # rank-<r>.pid: the live worker processes (to watch or to kill)
# the objectives' metrics that are counts, summed over micro-batches (the others averaged)
COUNTED_METRICS = frozenset({"tokens"})


def train_worker(payload: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch

    config = TrainConfig.model_validate(payload["config"])
    data_files = [Path(p) for p in payload["data"]]
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    device = ray.train.torch.get_device()
    board = payload.get("board")
    if (
        board is not None
        and ray.get(board.where.remote()) == ray.get_runtime_context().get_node_id()
    ):
        board = None  # on the driver's node: rank 0 writes there itself
    Worker(config, data_files, rank, world, device, report=ray.train.report, board=board).run()


class Worker:
    def __init__(
        self,
        config: TrainConfig,
        data_files: list[Path],
        rank: int,
        world: int,
        device: torch.device,
        report: Any,
        board: Any = None,
    ) -> None:
        """``board``: where rank 0's statuses go when the driver is on another node
        (``board.StatusBoard``)."""
        self.config = config
        self.board = board
        self.data_files = data_files
        self.rank, self.world, self.device = rank, world, device
        self.report = report
        self.store: CheckpointStore = store_for(config.checkpoint_target)
        self.out = config.out
        previous = read_status(self.out)
        self.attempt = (previous.attempt + 1) if previous and previous.state == "running" else 1
        self.root: Any = None  # the FSDP root (an ObjectiveForward) under fsdp
        self.sink = MetricsSink(self.out, self.out.name, config.metrics_port) if rank == 0 else None
        self.status = RunStatus(state="running", max_steps=config.max_steps, attempt=self.attempt)

    # ---- setup ----------------------------------------------------------------------
    def run(self) -> None:
        workers = self.out / WORKERS_DIR
        workers.mkdir(parents=True, exist_ok=True)
        (workers / f"rank-{self.rank}.pid").write_text(f"{os.getpid()}\n")
        try:
            self._run()
        finally:
            if self.sink is not None:
                self.sink.close()

    def _run(self) -> None:
        from transformers import AutoTokenizer

        config = self.config
        torch.manual_seed(config.hyperparameters.seed)
        # the tool format the checkpoint server renders with (chat_format)
        tokenizer = with_tool_format(
            AutoTokenizer.from_pretrained(config.model, local_files_only=True),
            source=str(config.model),
        )
        last = self.store.latest()
        self.status = self.status.model_copy(
            update={
                "step": last or 0,
                "checkpoint": self.store.uri(last) if last else None,
                "checkpoint_step": last,
            }
        )
        weights = config.model
        if last is not None:
            weights = self.store.fetch(last, self.out / ".cache" / f"rank-{self.rank}")
        objective = build_objective(config.objective, config.objective_options)
        model = self._load_model(weights)
        objective.prepare(model)
        # The loss: the objective on the model itself; under FSDP through the sharded root
        # (its forward is the loss), so both strategies run the same chunked LM head.
        if config.strategy == "fsdp":
            self.root = shard_fsdp(model, objective, bf16=self.device.type == "cuda")
        trainable = [p for p in model.parameters() if p.requires_grad]
        hp = config.hyperparameters
        optimizer = torch.optim.AdamW(trainable, lr=hp.learning_rate, weight_decay=hp.weight_decay)
        warmup = hp.warmup_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda done: min(1.0, (done + 1) / warmup) if warmup else 1.0
        )
        if last is not None:
            restore_trainer_state(weights, model, optimizer, scheduler)
        elif config.optimizer_state_from is not None:  # an on-policy round goes on
            restore_trainer_state(config.optimizer_state_from, model, optimizer, scheduler)
        try:
            data = load_data(config, self.data_files, tokenizer)
        except ObjectiveError as exc:  # data the objective refuses: a retry would too
            self._finish("failed", reason="error", message=f"cannot train on the data: {exc}")
            return
        if self.rank == 0:
            (self.out / "data_report.json").write_text(data.report.model_dump_json(indent=2))
        if not data.examples:
            self._finish("failed", reason="no_examples", message=no_examples_message(data.report))
            return
        self._publish(data)
        extra = self._extra_models(objective)
        self._loop(model, trainable, objective, optimizer, scheduler, tokenizer, data, extra)

    def _load_model(self, folder: Path) -> Any:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, dtype=torch.float32
        )
        if self.config.hyperparameters.gradient_checkpointing:
            # SmolLM2's two-round OPD on the test-bed's node (trajectories of ~3k tokens)
            # went past 10 GiB without it, every layer's activations kept for the backward
            model.gradient_checkpointing_enable()  # type: ignore[no-untyped-call]
            model.config.use_cache = False
        return model.to(self.device).train()  # type: ignore[arg-type]

    def _extra_models(self, objective: Objective) -> dict[str, Any]:
        from transformers import AutoModelForCausalLM

        wanted = {
            "reference_model": self.config.reference_model if objective.needs_reference else None,
            "teacher_model": self.config.teacher_model if objective.needs_teacher else None,
        }
        if objective.needs_reference and wanted["reference_model"] is None:
            wanted["reference_model"] = self.config.model  # the starting policy
        models: dict[str, Any] = {}
        for role, path in wanted.items():
            if path is not None:
                extra = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
                extra.requires_grad_(False)
                models[role] = extra.to(self.device).eval()  # type: ignore[arg-type]
        return models

    def _publish(self, data: RunData) -> None:
        if self.sink is not None:
            self.sink.set(
                max_steps=self.config.max_steps,
                step=self.status.step,
                attempt=self.attempt,
                groups_kept=data.groups,
                failed=0,
                last_checkpoint_step=self.status.checkpoint_step,
            )
        self._write_status()

    # ---- the loop ---------------------------------------------------------------------
    def _loop(
        self,
        model: Any,
        trainable: list[torch.nn.Parameter],
        objective: Objective,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        tokenizer: Any,
        data: RunData,
        extra: dict[str, Any],
    ) -> None:
        config = self.config
        step = self.status.step
        for step in range(self.status.step + 1, config.max_steps + 1):
            record = self._step(
                step, model, trainable, objective, optimizer, scheduler, tokenizer, data, extra
            )
            if record is None:
                return
            self.status = self.status.model_copy(update={"step": step})
            if step % config.checkpoint_every == 0 or step == config.max_steps:
                uri = save_checkpoint(
                    self.store,
                    step=step,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    tokenizer=tokenizer,
                    info={
                        "objective": config.objective,
                        "loss": record["loss"],
                        "base": str(config.model),
                    },
                    keep=config.keep_checkpoints,
                    rank=self.rank,
                    staging=self.out / ".staging",
                )
                self.status = self.status.model_copy(
                    update={"checkpoint": uri, "checkpoint_step": step}
                )
                record.update(checkpoint=uri, last_checkpoint_step=step)
            if self.sink is not None:
                self.sink.step(record)
            self._write_status()
            self.report({k: v for k, v in record.items() if isinstance(v, int | float)})
        self._finish("succeeded", message=f"{step} steps")

    def _step(
        self,
        step: int,
        model: Any,
        trainable: list[torch.nn.Parameter],
        objective: Objective,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        tokenizer: Any,
        data: RunData,
        extra: dict[str, Any],
    ) -> dict[str, Any] | None:
        """One optimizer step; its metrics, or None when the run failed on it."""
        hp = self.config.hyperparameters
        started = time.perf_counter()
        share = step_batch(len(data.examples), step, hp.batch_size, hp.seed)
        examples = [data.examples[i] for i in worker_share(share, self.rank, self.world)]
        largest = len(worker_share(share, 0, self.world))  # rank 0's share is the largest
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        chunks = micro_chunks(examples, hp.micro_batch_size, largest)
        batches = [collate(chunk or examples[:1], pad_id) for chunk in chunks]
        options = self.config.objective_options
        units = [
            loss_units(self.config.objective, options, b) if chunk else 0
            for chunk, b in zip(chunks, batches, strict=True)
        ]
        (total_units,) = reduce_sums([sum(units)], self.device)
        sharded = self.root is not None
        finite, loss_sum, tokens_here = True, 0.0, 0
        weighted: dict[str, float] = {}
        for index, (chunk, batch, count) in enumerate(zip(chunks, batches, units, strict=True)):
            if not chunk and not sharded:
                continue  # FSDP runs an empty chunk (weight 0) to match the others' passes
            if sharded:  # reduce-scatter once, after the last micro-batch
                self.root.set_requires_gradient_sync(index == len(chunks) - 1)
            with self._autocast():
                loss, metrics = self._loss(model, objective, batch, extra)
            finite = finite and bool(torch.isfinite(loss.detach()).item())
            scaled = loss * loss_scale(count, total_units, self.world)
            scaled.backward()  # type: ignore[no-untyped-call]
            if chunk:
                loss_sum += float(loss.detach()) * count
                tokens_here += int(batch["attention_mask"].sum().item())
                for key, value in metrics.items():  # counts add up, the rest averages
                    weight = 1 if key in COUNTED_METRICS else count
                    weighted[key] = weighted.get(key, 0.0) + value * weight
        metrics = {
            k: v if k in COUNTED_METRICS else v / max(sum(units), 1) for k, v in weighted.items()
        }
        if not all_agree(finite, self.device):
            optimizer.zero_grad(set_to_none=True)
            self._fail_non_finite(step, "loss", {"loss": loss_sum / max(sum(units), 1)})
            return None
        if self.config.strategy == "replicated":
            average_gradients(trainable)
        norm: Any = torch.nn.utils.clip_grad_norm_(trainable, hp.max_grad_norm)
        grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # FSDP
        if not math.isfinite(grad_norm):  # the same on every worker: gradients are shared
            optimizer.zero_grad(set_to_none=True)
            self._fail_non_finite(step, "gradient norm", metrics)
            return None
        learning_rate = float(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        known = data.rewards
        rewards = [known[e.trajectory_id] for e in examples if e.trajectory_id in known]
        tokens, loss_sum, reward_sum, rewarded = reduce_sums(
            [tokens_here, loss_sum, sum(rewards), len(rewards)], self.device
        )
        seconds = time.perf_counter() - started
        return {
            "step": step,
            "attempt": self.attempt,
            "loss": loss_sum / max(total_units, 1.0),  # the step's global mean
            "tokens": int(tokens),
            "tokens_per_second": tokens / seconds if seconds > 0 else None,
            "grad_norm": grad_norm,
            "reward_mean": reward_sum / rewarded if rewarded else None,
            "groups_kept": data.groups,
            "learning_rate": learning_rate,
            "seconds": round(seconds, 4),
            **{f"objective/{k}": v for k, v in metrics.items() if k != "loss"},
        }

    def _loss(
        self, model: Any, objective: Objective, batch: Batch, extra: dict[str, Any]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        if self.root is not None:
            loss, metrics = self.root(batch, extra)
            return loss, metrics
        return objective.loss(model, batch, **extra)

    def _autocast(self) -> AbstractContextManager[Any]:
        if self.device.type == "cuda" and self.config.strategy == "replicated":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    # ---- ending ---------------------------------------------------------------------
    def _fail_non_finite(self, step: int, what: str, metrics: dict[str, float]) -> None:
        kept = self.status.checkpoint or "none saved yet"
        loss = metrics.get("loss", math.nan)
        if self.sink is not None:
            self.sink.step({"step": step, "attempt": self.attempt, "loss": loss, "failed": 1})
            self.sink.set(loss=math.nan)  # NaN on the gauge too: alerts can test for it
        self._finish(
            "failed",
            reason="non_finite_loss",
            message=f"step {step}: the {what} is not finite (loss {loss!r}); stopped "
            f"without stepping; the last good checkpoint is {kept}",
        )

    def _finish(self, state: State, reason: FailureReason | None = None, message: str = "") -> None:
        self.status = self.status.model_copy(
            update={"state": state, "reason": reason, "message": message}
        )
        if self.sink is not None:
            self.sink.set(failed=1 if state == "failed" else 0, step=self.status.step)
        self._write_status()
        barrier()

    def _write_status(self) -> None:
        if self.rank == 0 and self.board is not None:
            import ray

            ray.get(self.board.write.remote(self.status.model_dump_json()))
        elif self.rank == 0:
            self.status.write(self.out)


def no_examples_message(report: PrepReport) -> str:
    """Why a run has nothing to train on; for GRPO, why no group is usable and how to
    roll out data that has one."""
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(report.dropped.items()))
    counts = f"{report.trajectories} trajectories; dropped: {dropped or 'none'}"
    if report.objective != "grpo":
        return f"no {report.objective} example in the data ({counts})"
    explain = getattr(report, "no_usable_group_reason", None)  # PrepReport's own, if any
    reason = explain() if callable(explain) else explain
    if isinstance(reason, str) and reason:
        return f"{reason} ({counts})"
    singletons, flat = report.groups_singleton, report.groups_zero_variance
    return (
        f"no GRPO group with reward spread: {_counted(singletons, 'singleton group')}, "
        f"{_counted(flat, 'zero-variance group')}; a group is one package under one "
        "harness and model — roll out ≥2 samples per package under the same harness, "
        f"e.g. --samples 4 ({counts})"
    )


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


__all__ = ["WORKERS_DIR", "Worker", "no_examples_message", "train_worker"]
