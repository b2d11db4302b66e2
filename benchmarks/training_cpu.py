"""One SFT step and one GRPO step on CPU, ours against TRL's trainers: tokens/s and peak memory.

    python benchmarks/training_cpu.py [--shape tiny|smollm2-135m] [--repeats 5] [--steps 5]
                                      [--equal-work] [--batch 8] [--hidden 128] [--layers 2]
                                      [--vocab 8192] [--seq-len 1024] [--threads 1]
                                      [--json out.json]

Same random Llama (built from a config, nothing downloaded), same batch. ``--shape tiny``
(the default): hidden ``--hidden``, ``--layers`` layers, vocabulary ``--vocab``, and
``--batch`` two-turn agent trajectories with tool calls (tests/training), grouped and
graded for GRPO. ``--shape smollm2-135m``: SmolLM2-135M's configuration (hidden 576,
intermediate 1536, 30 layers, 9 heads, 3 KV heads, head dim 64, vocabulary 49152, tied
embeddings, RoPE θ 100000) with random weights, and one trajectory of ``--seq-len`` random
tokens: a 128-token context, then agent and tool blocks of 128 tokens in turn (about half
agent tokens), advantage 1. Behaviour log-probs are near the model's own in both. A step is
loss + backward + AdamW step:

- ours: ``build_objective(...).loss`` on ``collate``'s batch;
- TRL (trl==1.16.0): ``SFTTrainer.training_step`` on its collator's batch (completion
  mask = our agent mask); for GRPO, ``GRPOTrainer.compute_loss`` + ``accelerator.backward``
  on the prompt/completion/tool-mask layout TRL's loss reads (its ``training_step`` would
  first generate, which is not what is compared here), with the same advantages and old
  log-probs.

The two do not do the same work. TRL's fused LM head computes, besides the targets'
log-probs, their entropy (both trainers) and whether each is the top-1 token (SFT), and
reduces them to logged floats; and on CPU it projects every position of the padded batch
(it keeps only the label positions on CUDA/XPU with Triton), ours only the states that
predict a target. ``--equal-work`` adds two variants per objective so both effects can be
read off: ``ours-*-eq``, ours also computing TRL's per-target entropy and token accuracy
(the same kernel outputs) and reducing them to floats as TRL logs them; and ``trl-*-tgt``,
TRL with its label-position selection on (the choice it makes on CUDA/XPU), so it projects
only the label positions on CPU too.

Each run of a case is its own process; ``--repeats`` runs of every case, interleaved
(all cases once, then again), so a change of load hits every case alike. Time per run:
the median of ``--steps`` timed steps after one warm-up step. Memory: what the timed
steps add to the resident set at their peak, over the process as it stood after setup
and the warm-up step (the kernel's high-water mark, VmHWM, reset through
/proc/self/clear_refs; so the model, optimizer state and libraries are not counted, every
allocation of the step is, inside custom kernels too), and the process's own peak RSS.
Memory the warm-up step freed but the C allocator kept is reused without raising the
resident set, so a run's step peak can read low (even 0): read the medians and ranges.
Tokens/s counts the batch's real (non-padding) tokens. The report gives per case the
median and the min–max over the runs, and ours/TRL ratios of the medians. One intra-op
thread by default: on a shared machine that keeps timings steady; the load average is
printed. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CASES = ("ours-sft", "trl-sft", "ours-grpo", "trl-grpo")
EQUAL_WORK_CASES = ("ours-sft-eq", "trl-sft-tgt", "ours-grpo-eq", "trl-grpo-tgt")
SHAPES = ("tiny", "smollm2-135m")
GROUPS: dict[str, list[float | None]] = {
    "env-a": [1.0, 0.2, 0.6, 0.0],
    "env-b": [0.0, 0.9, 0.5, 0.3],
    "env-c": [0.4, 0.8, 0.1, 0.7],
    "env-d": [1.0, 0.0, 0.5, 0.25],
}
# SmolLM2-135M's configuration (its config.json), with random weights.
SMOLLM2_135M = {
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
# The synthetic trajectory of --shape smollm2-135m: a context block, then agent and tool
# blocks in turn.
BLOCK = 128


def objective_of(case: str) -> str:
    return "sft" if "-sft" in case else "grpo"


def build(args: argparse.Namespace) -> tuple[Any, Any, list[Any], Any]:
    """The model, tokenizer, examples and objective config shared by every case."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from coworkgym_training.objectives import ObjectiveConfig, examples_from_trajectories
    from tests.training import objective_data as data

    torch.set_num_threads(args.threads)
    tokenizer = data.tokenizer()
    torch.manual_seed(0)
    objective_config = ObjectiveConfig()
    if args.shape == "smollm2-135m":
        config = LlamaConfig(**SMOLLM2_135M)
        model = LlamaForCausalLM(config)
        examples = [synthetic_example(args.seq_len, len(tokenizer), config.vocab_size)]
    else:
        config = LlamaConfig(
            vocab_size=max(args.vocab, len(tokenizer)),
            hidden_size=args.hidden,
            intermediate_size=args.hidden * 3,
            num_hidden_layers=args.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
        )
        model = LlamaForCausalLM(config)
        trajectories = data.graded(GROUPS)[: args.batch]
        examples, _ = examples_from_trajectories(trajectories, tokenizer, "grpo", objective_config)
    examples = data.behaved(examples, model, jitter=0.2)
    return model, tokenizer, examples, objective_config


def synthetic_example(length: int, first_free_id: int, vocab: int) -> Any:
    """One trajectory of `length` random tokens (ids above the tokenizer's, so none is its
    pad or a special token): a BLOCK-token context, then agent and tool blocks in turn."""
    import torch

    from coworkgym_training.objectives import TrainExample

    ids = torch.randint(first_free_id, vocab, (length,), generator=torch.Generator().manual_seed(1))
    agent = [t >= BLOCK and (t // BLOCK) % 2 == 1 for t in range(length)]
    return TrainExample(
        trajectory_id="synthetic",
        input_ids=ids.tolist(),
        agent_mask=agent,
        behaviour_logprobs=[None] * length,
        env_id="synthetic",
        group_id="synthetic",
        reward=1.0,
        advantage=1.0,
    )


class _WithTrlMetrics:
    """Our chunked head, also computing what TRL's fused head computes per target for its
    logs (entropy; for SFT, whether the target is the top-1 token, which ours already asks
    for) and reducing them to floats as TRL's trainers log them."""

    def __init__(self, inner: Any, sft: bool) -> None:
        self.inner = inner
        self.extras = ("entropy", "is_top1") if sft else ("entropy",)
        self.logged: list[float] = []

    def apply(self, *args: Any) -> Any:
        *head, outputs = args
        wanted = tuple(dict.fromkeys((*outputs, *self.extras)))
        logprobs, entropy, log_sum_sq, mean_logits, is_top1 = self.inner.apply(*head, wanted)
        count = max(logprobs.numel(), 1)
        self.logged.append(float(entropy.detach().sum()) / count)
        if is_top1 is not None:
            self.logged.append(float(is_top1.sum()) / count)
        if "is_top1" not in outputs:
            is_top1 = None
        return logprobs, None, log_sum_sq, mean_logits, is_top1


def ours(case: str, model: Any, tokenizer: Any, examples: list[Any], config: Any) -> Any:
    import torch

    from coworkgym_training.objectives import build_objective, collate
    from coworkgym_training.objectives import logprobs as logprobs_module

    objective_name = objective_of(case)
    if case.endswith("-eq"):
        logprobs_module.ChunkedLogProbFunction = _WithTrlMetrics(  # type: ignore[assignment,misc]
            logprobs_module.ChunkedLogProbFunction, sft=objective_name == "sft"
        )
    objective = build_objective(objective_name, config)
    objective.prepare(model)
    batch = collate(examples, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()

    def forward_backward() -> None:
        loss, _ = objective.loss(model, batch)
        loss.backward()

    def update() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return forward_backward, update, batch["attention_mask"].sum().item()


def trl(case: str, model: Any, tokenizer: Any, examples: list[Any], config: Any) -> Any:
    import torch
    from datasets import Dataset

    if case.endswith("-tgt"):
        import trl.trainer.utils as trl_utils

        # The fused head keeps only the label positions where this says Triton runs
        # (CUDA/XPU) and projects every position elsewhere; the kernel's own tile code
        # (torch ops on CPU) is chosen by its own module's copy, left as it is.
        trl_utils._use_triton = lambda device: True  # type: ignore[attr-defined]

    out = tempfile.mkdtemp()
    common = {"output_dir": out, "report_to": [], "use_cpu": True, "bf16": False}
    if objective_of(case) == "sft":
        from trl import SFTConfig, SFTTrainer

        rows = [
            {"input_ids": e.input_ids, "completion_mask": [int(m) for m in e.agent_mask]}
            for e in examples
        ]
        sft_args = SFTConfig(
            per_device_train_batch_size=len(rows),
            completion_only_loss=True,
            max_length=None,
            **common,
        )
        trainer: Any = SFTTrainer(
            model=model,
            args=sft_args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
        )
        inputs = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
        tokens = inputs["attention_mask"].sum().item()
    else:
        from trl import GRPOConfig, GRPOTrainer

        from coworkgym_training.objectives import collate
        from tests.training.objective_data import trl_inputs

        settings = config.grpo
        grpo_args = GRPOConfig(
            per_device_train_batch_size=4,
            num_generations=4,
            beta=0.0,
            loss_type="bnpo",  # = our "token" aggregation
            epsilon=settings.clip_epsilon_low,
            epsilon_high=settings.clip_epsilon_high,
            **common,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            args=grpo_args,
            train_dataset=Dataset.from_list([{"prompt": "."}] * 4),
            processing_class=tokenizer,
        )
        batch = collate(examples, tokenizer.pad_token_id)
        inputs = trl_inputs(batch)
        tokens = batch["attention_mask"].sum().item()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train otherwise
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    trainer.model.train()

    def forward_backward() -> None:
        if objective_of(case) == "sft":
            trainer.training_step(trainer.model, dict(inputs), None)
        else:
            loss = trainer.compute_loss(trainer.model, dict(inputs))
            trainer.accelerator.backward(loss)

    def update() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return forward_backward, update, tokens


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> int:
    """Reset the kernel's resident-set high-water mark (VmHWM); the RSS now, in KiB."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")
    return _status_kb("VmRSS")


def run_case(case: str, args: argparse.Namespace) -> dict[str, Any]:
    model, tokenizer, examples, config = build(args)
    model = copy.deepcopy(model)
    make = ours if case.startswith("ours") else trl
    forward_backward, update, tokens = make(case, model, tokenizer, examples, config)

    def step() -> None:
        forward_backward()
        update()

    step()  # warm-up: optimizer state, lazy initializations
    before_kb = reset_peak_rss()
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    step_peak_kb = _status_kb("VmHWM") - before_kb
    seconds = statistics.median(times)
    return {
        "case": case,
        "tokens": int(tokens),
        "agent_tokens": sum(e.agent_tokens for e in examples),
        "step_s": seconds,
        "tokens_per_s": tokens / seconds,
        # What a step adds to the resident set at its peak, over the process after setup
        # and one warm-up step (model, optimizer state, libraries): the step's own memory.
        "step_peak_mb": step_peak_kb / 1024,
        "process_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shape", choices=SHAPES, default="tiny")
    parser.add_argument("--repeats", type=int, default=5, help="runs (processes) per case")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run")
    parser.add_argument(
        "--equal-work",
        action="store_true",
        help="add ours computing TRL's metrics and TRL scoring only label positions",
    )
    parser.add_argument("--batch", type=int, default=8, help="trajectories per batch (≤ 16)")
    parser.add_argument("--hidden", type=int, default=128, help="tiny shape only")
    parser.add_argument("--layers", type=int, default=2, help="tiny shape only")
    parser.add_argument("--vocab", type=int, default=8192, help="tiny shape only")
    parser.add_argument(
        "--seq-len", type=int, default=1024, help="smollm2-135m shape: the trajectory's tokens"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--case", choices=CASES + EQUAL_WORK_CASES, help=argparse.SUPPRESS
    )  # one run of one case, in-process
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args)))
        return

    import warnings

    warnings.simplefilter("ignore")
    passed = _without_json(sys.argv[1:])
    cases = CASES + (EQUAL_WORK_CASES if args.equal_work else ())
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for case in cases:
            command = [sys.executable, __file__, "--case", case, *passed]
            env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                sys.exit(f"{case} failed:\n{done.stderr[-4000:]}")
            runs[case].append(json.loads(done.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
    report(runs, loads, args)


def _without_json(argv: list[str]) -> list[str]:
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
            continue
        if item.startswith("--json="):
            continue
        if item == "--json":
            skip = True
            continue
        out.append(item)
    return out


FIGURES = ("tokens_per_s", "step_s", "step_peak_mb", "process_peak_mb")


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median, min and max over the runs of each figure."""
    return {
        figure: {
            "median": statistics.median(r[figure] for r in runs),
            "min": min(r[figure] for r in runs),
            "max": max(r[figure] for r in runs),
        }
        for figure in FIGURES
    }


def ratio(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float]:
    """ours/TRL from the medians: speed, the step's peak memory, the process's peak."""
    return {
        "speed": mine["tokens_per_s"]["median"] / theirs["tokens_per_s"]["median"],
        "step_memory": mine["step_peak_mb"]["median"] / max(theirs["step_peak_mb"]["median"], 1e-9),
        "process_memory": mine["process_peak_mb"]["median"] / theirs["process_peak_mb"]["median"],
    }


def report(
    runs: dict[str, list[dict[str, Any]]], loads: list[float], args: argparse.Namespace
) -> None:
    first = runs["ours-sft"][0]
    if args.shape == "smollm2-135m":
        model = "SmolLM2-135M shape (random weights)"
        batch = "1 trajectory"
    else:
        model = f"Llama hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}"
        batch = f"batch {args.batch} trajectories"
    print(
        f"model: {model}; {batch}, {first['tokens']} tokens ({first['agent_tokens']} agent); "
        f"{args.threads} thread(s); {args.repeats} run(s) per case, each the median of "
        f"{args.steps} steps; load average (1 min) {min(loads):.1f}–{max(loads):.1f} "
        f"over the runs"
    )
    print("median [min–max] over the runs")
    summary = {case: summarize(case_runs) for case, case_runs in runs.items()}
    columns = (
        ("tokens/s", "tokens_per_s", 0),
        ("step s", "step_s", 3),
        ("step peak MB", "step_peak_mb", 0),
        ("process MB", "process_peak_mb", 0),
    )
    rows = [["", *(title for title, _, _ in columns)]]
    for case, figures in summary.items():
        row = [case]
        for _, figure, digits in columns:
            f = figures[figure]
            row.append(f"{f['median']:.{digits}f} [{f['min']:.{digits}f}–{f['max']:.{digits}f}]")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            row[0].ljust(widths[0])
            + "".join(f"  {c:>{w}}" for c, w in zip(row[1:], widths[1:], strict=True))
        )
    ratios: dict[str, dict[str, float]] = {}
    pairs = [("sft", "ours-sft", "trl-sft"), ("grpo", "ours-grpo", "trl-grpo")]
    if args.equal_work:
        pairs += [
            ("sft equal work", "ours-sft-eq", "trl-sft-tgt"),
            ("grpo equal work", "ours-grpo-eq", "trl-grpo-tgt"),
            ("sft: ours-eq/ours", "ours-sft-eq", "ours-sft"),
            ("grpo: ours-eq/ours", "ours-grpo-eq", "ours-grpo"),
            ("sft: trl-tgt/trl", "trl-sft-tgt", "trl-sft"),
            ("grpo: trl-tgt/trl", "trl-grpo-tgt", "trl-grpo"),
        ]
    for label, mine, theirs in pairs:
        r = ratios[label] = ratio(summary[mine], summary[theirs])
        print(
            f"{label} ({mine}/{theirs}, medians): speed {r['speed']:.2f}x, step peak memory "
            f"{r['step_memory']:.2f}x, process peak {r['process_memory']:.2f}x"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "runs": runs,
                    "summary": summary,
                    "ratios": ratios,
                    "loads": loads,
                }
            )
        )


if __name__ == "__main__":
    main()
