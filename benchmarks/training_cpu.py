"""One SFT step and one GRPO step on CPU, ours against TRL's trainers: tokens/s and peak memory.

    python benchmarks/training_cpu.py [--steps 5] [--batch 8] [--hidden 128] [--layers 2]
                                      [--vocab 8192] [--threads 1] [--json out.json]

Same tiny random Llama (built from a config, nothing downloaded), same batch: two-turn
agent trajectories with tool calls (tests/training), grouped and graded for GRPO, with
behaviour log-probs near the model's own. A step is loss + backward + AdamW step:

- ours: ``build_objective(...).loss`` on ``collate``'s batch;
- TRL (trl==1.16.0): ``SFTTrainer.training_step`` on its collator's batch (completion
  mask = our agent mask); for GRPO, ``GRPOTrainer.compute_loss`` + ``accelerator.backward``
  on the prompt/completion/tool-mask layout TRL's loss reads (its ``training_step`` would
  first generate, which is not what is compared here), with the same advantages and old
  log-probs.

Each (implementation, objective) runs in its own process. Time: the median of ``--steps``
timed steps after one warm-up step. Memory: what the timed steps add to the resident
set at their peak, over the process as it stood after setup and the warm-up step (the
kernel's high-water mark, VmHWM, reset through /proc/self/clear_refs; so the model,
optimizer state and libraries are not counted, every allocation of the step is, inside
custom kernels too), and the process's own peak RSS. Tokens/s counts the batch's real
(non-padding) tokens. One intra-op thread by default: on a shared machine that keeps
timings steady; the load average is printed. Prints figures; asserts nothing.
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
GROUPS: dict[str, list[float | None]] = {
    "env-a": [1.0, 0.2, 0.6, 0.0],
    "env-b": [0.0, 0.9, 0.5, 0.3],
    "env-c": [0.4, 0.8, 0.1, 0.7],
    "env-d": [1.0, 0.0, 0.5, 0.25],
}


def build(args: argparse.Namespace) -> tuple[Any, Any, list[Any], Any]:
    """The model, tokenizer, examples and objective config shared by every case."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from coworkgym_training.objectives import ObjectiveConfig, examples_from_trajectories
    from tests.training import objective_data as data

    torch.set_num_threads(args.threads)
    tokenizer = data.tokenizer()
    torch.manual_seed(0)
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
    objective_config = ObjectiveConfig()
    trajectories = data.graded(GROUPS)[: args.batch]
    examples, _ = examples_from_trajectories(trajectories, tokenizer, "grpo", objective_config)
    examples = data.behaved(examples, model, jitter=0.2)
    return model, tokenizer, examples, objective_config


def ours(case: str, model: Any, tokenizer: Any, examples: list[Any], config: Any) -> Any:
    import torch

    from coworkgym_training.objectives import build_objective, collate

    objective = build_objective("sft" if case.endswith("sft") else "grpo", config)
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

    out = tempfile.mkdtemp()
    common = {"output_dir": out, "report_to": [], "use_cpu": True, "bf16": False}
    if case.endswith("sft"):
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
        if case.endswith("sft"):
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
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8, help="trajectories per batch (≤ 16)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case, in-process
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args)))
        return

    import warnings

    warnings.simplefilter("ignore")
    passed = _without_json(sys.argv[1:])
    results: dict[str, dict[str, Any]] = {}
    for case in CASES:
        command = [sys.executable, __file__, "--case", case, *passed]
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            sys.exit(f"{case} failed:\n{done.stderr[-4000:]}")
        results[case] = json.loads(done.stdout.strip().splitlines()[-1])
    report(results, args)


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


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    print(
        f"model: Llama hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}; "
        f"batch {args.batch} trajectories, {results['ours-sft']['tokens']} tokens "
        f"({results['ours-sft']['agent_tokens']} agent); {args.threads} thread(s); "
        f"median of {args.steps} steps; load average {load:.1f}"
    )
    header = f"{'':10}{'tokens/s':>10}{'step s':>8}{'step peak MB':>14}{'process MB':>12}"
    print(header)
    for case in CASES:
        r = results[case]
        print(
            f"{case:10}{r['tokens_per_s']:>10.0f}{r['step_s']:>8.3f}"
            f"{r['step_peak_mb']:>14.1f}{r['process_peak_mb']:>12.0f}"
        )
    ratios = {}
    for objective in ("sft", "grpo"):
        mine, theirs = results[f"ours-{objective}"], results[f"trl-{objective}"]
        ratios[objective] = {
            "speed": mine["tokens_per_s"] / theirs["tokens_per_s"],
            "step_memory": mine["step_peak_mb"] / max(theirs["step_peak_mb"], 1e-9),
            "process_memory": mine["process_peak_mb"] / theirs["process_peak_mb"],
        }
        r = ratios[objective]
        print(
            f"{objective}: ours/TRL speed {r['speed']:.2f}x, step peak memory "
            f"{r['step_memory']:.2f}x, process peak {r['process_memory']:.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"results": results, "ratios": ratios, "load": load}))


if __name__ == "__main__":
    main()
