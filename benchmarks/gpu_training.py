"""SFT and GRPO steps of a ~0.5B model on one accelerator: tokens/s, MFU and peak memory.

    python benchmarks/gpu_training.py [--seq-len 2048] [--batch 4] [--steps 10]
                                      [--objectives sft grpo] [--peak-tflops 989]
    python benchmarks/gpu_training.py --device cpu --tiny      # a smoke run, seconds
    python benchmarks/gpu_training.py --learning [--out out/learning-gpu]

``--learning`` runs ``benchmarks/learning.py`` (base → SFT → GRPO on held-out packages,
SmolLM2-135M-Instruct) at a larger scale than the 2-core run: three families, 8 train and 6
held-out seeds each, 80 SFT steps of 8 sequences, 8 samples per package and 8 GRPO steps,
served and trained on the accelerator.

The model is a Qwen2-0.5B-shaped configuration (24 layers, hidden 896, 14 heads with 2 KV
heads, MLP 4864, vocabulary 151,936, tied embeddings: 494M parameters) with random weights:
nothing is downloaded. The batch is random token ids; the second half of each sequence is
the agent's (the targets), as in a trajectory whose context precedes the policy's reply.
GRPO's batch carries behaviour log-probs (the model's own, jittered) and ±1 advantages, so
the policy ratio and its clipping run as in training.

A step is what the trainer's worker does: ``build_objective(...).loss`` on ``collate``'s
batch, backward, gradient clipping and an AdamW step, with fp32 weights and bf16 autocast
on CUDA (``--dtype float32`` for full precision). Time is the median of ``--steps`` steps
after ``--warmup`` untimed ones, synchronized.

MFU = model FLOPs per second / the device's peak dense bf16 FLOPs (``--peak-tflops``; known
for H100/H200 (989), A100 (312) and L40S (362) by name, else MFU is not printed). Model
FLOPs per step, for T tokens of which T_a are targets, sequence length S, L layers, width
d, vocabulary V and N non-embedding parameters: 6·N·T (the transformer, forward and
backward) + 6·d·V·T_a (the LM head, which the objectives apply at target positions only)
+ 6·L·d·S·T (causal attention scores and values: 12·L·d·S per token, halved by the mask).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from coworkgym_training.objectives import TrainExample, build_objective, collate

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0}


def qwen2_half_b(tiny: bool) -> Any:
    from transformers import Qwen2Config

    if tiny:
        return Qwen2Config(
            vocab_size=1024,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            tie_word_embeddings=True,
        )
    return Qwen2Config(
        vocab_size=151_936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32_768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    )


def examples(config: Any, batch: int, seq_len: int, seed: int) -> list[TrainExample]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for row in range(batch):
        ids = torch.randint(0, config.vocab_size, (seq_len,), generator=generator).tolist()
        mask = [t >= seq_len // 2 for t in range(seq_len)]
        out.append(
            TrainExample(
                trajectory_id=f"t{row}",
                input_ids=ids,
                agent_mask=mask,
                behaviour_logprobs=[None] * seq_len,
                env_id=f"env-{row // 2}",
                group_id=f"group-{row // 2}",
                reward=float(row % 2),
                advantage=1.0 if row % 2 else -1.0,
            )
        )
    return out


@torch.no_grad()
def with_behaviour(batch: dict[str, torch.Tensor], model: Any, device: torch.device) -> None:
    """Behaviour log-probs: the model's own, jittered, as a slightly older policy's."""
    ids = batch["input_ids"].to(device)
    logits = model(input_ids=ids, attention_mask=batch["attention_mask"].to(device)).logits
    own = torch.log_softmax(logits[:, :-1].float(), -1).gather(2, ids[:, 1:, None])[..., 0]
    jitter = 0.05 * torch.randn_like(own)
    behaviour = torch.full_like(batch["behaviour_logprobs"], math.nan)
    targets = batch["target_mask"][:, 1:].to(device)
    behaviour[:, 1:] = torch.where(targets, own + jitter, math.nan).cpu()
    batch["behaviour_logprobs"] = behaviour


def model_flops(config: Any, non_embedding: int, tokens: int, targets: int, seq_len: int) -> float:
    d, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    transformer = 6.0 * non_embedding * tokens
    head = 6.0 * d * vocab * targets
    attention = 6.0 * layers * d * seq_len * tokens
    return transformer + head + attention


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    if given is not None:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def run(objective_name: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = qwen2_half_b(args.tiny)
    config._attn_implementation = "sdpa"
    model: Any = AutoModelForCausalLM.from_config(config, dtype=torch.float32).to(device).train()
    embedding = model.get_input_embeddings().weight.numel()
    parameters = sum(p.numel() for p in model.parameters())
    objective = build_objective(objective_name)
    objective.prepare(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    batch = collate(examples(config, args.batch, args.seq_len, seed=1), pad_id=0)
    if objective_name == "grpo":
        with_behaviour(batch, model, device)
    tokens = int(batch["attention_mask"].sum())
    targets = int(batch["target_mask"].sum())
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16)
        if device.type == "cuda" and args.dtype == "bfloat16"
        else torch.autocast("cpu", enabled=False)
    )

    def step() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        with autocast:
            loss, _ = objective.loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - started

    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = statistics.median(step() for _ in range(args.steps))
    flops = model_flops(config, parameters - embedding, tokens, targets, args.seq_len)
    peak = peak_tflops(device, args.peak_tflops)
    return {
        "objective": objective_name,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "parameters": parameters,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "tokens": tokens,
        "step_s": round(seconds, 4),
        "tokens_per_s": round(tokens / seconds, 1),
        "model_tflops_per_s": round(flops / seconds / 1e12, 2),
        "mfu": round(flops / seconds / (peak * 1e12), 4) if peak else None,
        "peak_memory_gib": (
            round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
            if device.type == "cuda"
            else None
        ),
    }


LEARNING_AT_SCALE = [
    "--families", "weather_report,report_figures,meeting_notes",
    "--train-seeds", "8", "--heldout-seeds", "6",
    "--sft-steps", "80", "--sft-batch", "8",
    "--grpo-samples", "8", "--grpo-steps", "8", "--workers", "16",
]  # fmt: skip


def main() -> None:
    if "--learning" in sys.argv[1:]:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import learning

        rest = [a for a in sys.argv[1:] if a != "--learning"]
        device = "cuda" if torch.cuda.is_available() else "cpu"
        raise SystemExit(learning.main([*LEARNING_AT_SCALE, "--device", device, *rest]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (smoke runs)")
    parser.add_argument("--seq-len", type=int, default=None, help="default 2048 (tiny: 128)")
    parser.add_argument("--batch", type=int, default=None, help="default 4 (tiny: 2)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 10; tiny 2)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--objectives", nargs="+", default=["sft", "grpo"], choices=["sft", "grpo"])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's bf16 peak")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    args.seq_len = args.seq_len or (128 if args.tiny else 2048)
    args.batch = args.batch or (2 if args.tiny else 4)
    args.steps = args.steps or (2 if args.tiny else 10)
    device = torch.device(args.device)
    rows = [run(name, args, device) for name in args.objectives]
    for row in rows:
        mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "n/a (no --peak-tflops)"
        memory = f"{row['peak_memory_gib']} GiB" if row["peak_memory_gib"] is not None else "n/a"
        print(
            f"{row['objective']:>4} on {row['device']}: {row['parameters'] / 1e6:.1f}M params, "
            f"batch {row['batch']}×{row['seq_len']}: {row['step_s']:.3f} s/step, "
            f"{row['tokens_per_s']:,.0f} tokens/s, {row['model_tflops_per_s']} TFLOP/s, "
            f"MFU {mfu}, peak memory {memory}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
