"""Cross-harness table: the same easy packages, the same model, every harness.

SmolLM2-135M-Instruct (``pretrained:smollm2-135m-instruct``) is served on the CPU by
``cowork-gym serve-checkpoint`` (greedy), and ``cowork-gym rollout`` drives it through each
harness on the same packages (weather_report and report_figures, easy, one turn). The table
gives, per harness, mean reward, mean tool calls, malformed calls and terminations.

    .venv/bin/python benchmarks/harnesses.py --out /tmp/cwg-harnesses

On a shared CPU a completion can take minutes: each rollout gets ``--timeout`` seconds of
wall clock (default an hour, not the packages' 900 s, so the table counts what the model
did rather than how loaded the machine was), and the server runs torch with one thread
(``OMP_NUM_THREADS=1`` unless set): with more threads than free cores, its threads wait on
each other and generation slows many times over.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning import (  # the sibling benchmark's helpers (on sys.path above)
    CLI,
    FAMILIES,
    MODEL,
    Settings,
    log,
    read_trajectories,
    run,
    served,
    synthesize,
)

HARNESSES = ("tool-calling", "shell-patch", "mini-swe-agent", "openai-agents")


def table(trajectories: list[Any]) -> list[dict[str, object]]:
    rows = []
    for harness in HARNESSES:
        mine = [t for t in trajectories if t.policy.harness == harness]
        rewards = [t.reward for t in mine if t.reward is not None]
        calls = [sum(len(m.tool_calls) for m in t.agent_messages()) for t in mine]
        # a reply with no call ends the turn under the tool-calling harnesses; under
        # mini-swe-agent it is a format error (not counted as a malformed call)
        bare = [sum(not m.tool_calls for m in t.agent_messages()) for t in mine]
        rows.append({
            "harness": harness,
            "rollouts": len(mine),
            "mean_reward": round(sum(rewards) / len(rewards), 3) if rewards else None,
            "mean_model_calls": round(sum(t.usage.requests for t in mine) / len(mine), 2)
            if mine else None,
            "mean_tool_calls": round(sum(calls) / len(calls), 2) if calls else None,
            "malformed_tool_calls": sum(t.usage.malformed_tool_calls for t in mine),
            "replies_without_call": sum(bare),
            "terminations": dict(Counter(t.termination.reason for t in mine)),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("/tmp/cwg-harnesses"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per rollout")
    parser.add_argument(
        "--table-only", action="store_true", help="print the table of the stored rollouts"
    )
    args = parser.parse_args()
    if args.table_only:
        log(
            json.dumps(
                table(read_trajectories(args.out / "rollouts" / "trajectories.jsonl")), indent=2
            )
        )
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by serve-checkpoint
    settings = Settings(
        out=args.out, families=list(FAMILIES), train_seeds=args.seeds, heldout_seeds=[],
        sft_steps=0, sft_batch=0, sft_lr=0.0, grpo_samples=0, grpo_packages=0,
        grpo_temperature=0.0, grpo_steps=0, grpo_lr=0.0, max_tokens=args.max_tokens,
        max_steps=args.max_steps, workers=2,
    )  # fmt: skip
    packages, _ = synthesize(settings)
    out = args.out / "rollouts"
    with served(f"pretrained:{MODEL}", MODEL, args.out / "server.log") as url:
        harnesses = [arg for name in HARNESSES for arg in ("--harness", name)]
        run([
            *CLI, "rollout", *packages, *harnesses, "--model", MODEL, "--base-url", url,
            "--samples", "1", "--workers", "2", "--temperature", "0",
            "--max-tokens", str(args.max_tokens), "--max-steps", str(args.max_steps),
            "--seed", "0", "--out", out, "--request-timeout", "3600",
            "--timeout", str(args.timeout),
        ])  # fmt: skip
    rows = table(read_trajectories(out / "trajectories.jsonl"))
    (args.out / "table.json").write_text(json.dumps(rows, indent=2))
    log(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
