"""The learning benchmark: does a real pretrained model get better on environments it has
not seen, by training on Cowork-Gym environments?

SmolLM2-135M-Instruct (``cowork-gym pretrained prepare``), on easy one-turn packages of a few
procedural families whose seeds are split into train and held-out:

    base      the pretrained model, measured on the held-out packages
    sft       SFT on the filtered (passed) oracle trajectories of the train packages
    grpo      one on-policy GRPO round from the SFT checkpoint: --samples rollouts of each
              train package against the SFT model at --grpo-temperature, groups with reward
              spread, then measured again

Each measurement rolls the model out with ``cowork-gym rollout --harness tool-calling``
against ``cowork-gym serve-checkpoint`` (greedy: temperature 0), and reports mean reward,
pass rate, the valid-tool-call rate, mean tool calls and how the rollouts ended; plus the
token-mean NLL of the held-out packages' oracle trajectories under the model. Every stage
goes through the command line, as a user would run it; each stage's output is kept under
``--out`` and a re-run skips stages already done (``--fresh`` starts over).

    .venv/bin/python benchmarks/learning.py                     # the full run (~1 h on 2 cores)
    .venv/bin/python benchmarks/learning.py --smoke             # load, a few calls, 1 step each

It prints a table and writes ``OUT/results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "coworkgym"]
MODEL = "smollm2-135m-instruct"
FAMILIES = ("weather_report", "report_figures")


@dataclass
class Settings:
    out: Path
    families: list[str]
    train_seeds: list[int]
    heldout_seeds: list[int]
    sft_steps: int
    sft_batch: int
    sft_lr: float
    grpo_samples: int
    grpo_packages: int
    grpo_temperature: float
    grpo_steps: int
    grpo_lr: float
    max_tokens: int
    max_steps: int
    workers: int
    device: str = "cpu"
    smoke: bool = False


@dataclass
class Measurement:
    stage: str
    rollouts: int = 0
    valid: int = 0
    mean_reward: float | None = None
    pass_rate: float | None = None
    tool_calls: int = 0
    malformed_tool_calls: int = 0
    valid_call_rate: float | None = None
    mean_tool_calls: float = 0.0
    terminations: dict[str, int] = field(default_factory=dict)
    finish_reasons: dict[str, int] = field(default_factory=dict)
    heldout_oracle_nll: float | None = None
    seconds: float = 0.0


def log(text: str) -> None:
    print(f"[learning {time.strftime('%H:%M:%S')}] {text}", flush=True)


def run(args: list[str], **kwargs: Any) -> None:
    log("$ " + " ".join(str(a) for a in args))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([str(a) for a in args], check=True, env=env, **kwargs)


# ---- the packages -----------------------------------------------------------------------
def synthesize(s: Settings) -> tuple[list[Path], list[Path]]:
    """Easy one-turn packages: the train and the held-out ones (by seed)."""
    from coworkgym.families import FAMILIES as REGISTRY

    specs = s.out / "specs"
    envs = s.out / "envs"
    specs.mkdir(parents=True, exist_ok=True)
    names: dict[str, list[str]] = {"train": [], "heldout": []}
    for family_name in s.families:
        family = REGISTRY[family_name]
        for split, seeds in (("train", s.train_seeds), ("heldout", s.heldout_seeds)):
            for seed in seeds:
                name = f"{family_name.replace('_', '-')}-s{seed}"
                names[split].append(name)
                labels = {
                    "capabilities": [family.capabilities[0]],
                    "scenario": family.scenarios[0],
                    "difficulty": "easy",
                    "deliverables": list(family.deliverables),
                    "modality": list(family.modalities),
                }
                spec = {
                    "apiVersion": "coworkgym.dev/v1alpha1",
                    "kind": "CoworkEnvironment",
                    "metadata": {"name": name},
                    "spec": {"task": {"family": family_name, "labels": labels, "turns": 1,
                                      "seed": seed}},
                }  # fmt: skip
                (specs / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    run([*CLI, "synth", specs, "--out", envs, "--workers", "2", "--no-harbor-lint"])
    return [envs / n for n in names["train"]], [envs / n for n in names["heldout"]]


# ---- serving and measuring --------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(model: str, name: str, log_path: Path, device: str = "cpu") -> Iterator[str]:
    """``cowork-gym serve-checkpoint`` on a free loopback port, until the block ends."""
    port = free_port()
    handle = log_path.open("w")
    process = subprocess.Popen(
        [
            *CLI,
            "serve-checkpoint",
            model,
            "--model-name",
            name,
            "--port",
            str(port),
            "--device",
            device,
            "--max-batch",
            "16",
        ],
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve-checkpoint exited {process.returncode}: {log_path}")
            try:
                if httpx.get(f"{url}/models", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"serve-checkpoint did not come up: {log_path}")
            time.sleep(1)
        yield url
        stats = httpx.get(f"{url}/stats", timeout=5, trust_env=False).json()
        log(f"server stats for {name}: {json.dumps(stats)}")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        handle.close()


def rollout(
    s: Settings,
    model: str,
    name: str,
    packages: list[Path],
    out: Path,
    *,
    samples: int,
    temperature: float,
) -> Path:
    done = out / "trajectories.jsonl"
    if (out / ".done").exists():
        return done
    with served(model, name, out.with_suffix(".server.log"), s.device) as url:
        run([
            *CLI, "rollout", *packages, "--harness", "tool-calling", "--model", name,
            "--base-url", url, "--samples", str(samples), "--workers", str(s.workers),
            "--temperature", str(temperature), "--max-tokens", str(s.max_tokens),
            "--max-steps", str(s.max_steps), "--seed", "0", "--out", out,
            # a CPU-served model writes a 1,000-token reply in minutes, batched with others
            "--request-timeout", "3600",
        ])  # fmt: skip
    (out / ".done").touch()
    return done


def read_trajectories(path: Path) -> list[Any]:
    from coworkgym.rollout.trajectory import Trajectory

    if not path.exists():
        return []
    return [Trajectory.model_validate_json(line) for line in path.read_text().splitlines() if line]


def measure(stage: str, trajectories: list[Any]) -> Measurement:
    m = Measurement(stage=stage, rollouts=len(trajectories))
    valid = [t for t in trajectories if t.verification is not None and t.verification.valid]
    m.valid = len(valid)
    rewards = [t.verification.reward for t in valid if t.verification.reward is not None]
    m.mean_reward = round(sum(rewards) / len(rewards), 4) if rewards else None
    m.pass_rate = (
        round(sum(t.verification.passed for t in valid) / len(valid), 4) if valid else None
    )
    m.tool_calls = sum(t.usage.tool_calls for t in trajectories)
    m.malformed_tool_calls = sum(t.usage.malformed_tool_calls for t in trajectories)
    if m.tool_calls:
        m.valid_call_rate = round(1 - m.malformed_tool_calls / m.tool_calls, 4)
    m.mean_tool_calls = round(m.tool_calls / max(1, len(trajectories)), 2)
    m.terminations = dict(Counter(t.termination.reason for t in trajectories))
    m.finish_reasons = dict(
        Counter(msg.finish_reason or "unreported" for t in trajectories for msg in t.messages
                if msg.source == "agent")
    )  # fmt: skip
    return m


def heldout_nll(model_folder: Path, oracle: list[Any]) -> float:
    """The token-mean NLL of the held-out oracle trajectories under the model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkgym_training.chat_format import with_tool_format
    from coworkgym_training.score import score_trajectory
    from coworkgym_training.tokenize import tokenize_trajectory

    tokenizer = with_tool_format(AutoTokenizer.from_pretrained(model_folder))
    model = AutoModelForCausalLM.from_pretrained(model_folder).eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for trajectory in oracle:
            tokenized = tokenize_trajectory(trajectory, tokenizer, tools=trajectory.tools or None)
            score = score_trajectory(model, tokenized)
            total += score.nll * score.scored_tokens
            tokens += score.scored_tokens
    return round(total / tokens, 4) if tokens else math.nan


def evaluate(
    s: Settings, stage: str, model: str, folder: Path, heldout: list[Path], oracle: list[Any]
) -> Measurement:
    cached = s.out / "measurements" / f"{stage}.json"
    if cached.exists():
        return Measurement(**json.loads(cached.read_text()))
    started = time.monotonic()
    out = s.out / "rollouts" / f"eval-{stage}"
    trajectories = read_trajectories(
        rollout(s, model, f"{MODEL}-{stage}", heldout, out, samples=1, temperature=0.0)
    )
    m = measure(stage, trajectories)
    m.heldout_oracle_nll = heldout_nll(folder, oracle)
    m.seconds = round(time.monotonic() - started, 1)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(asdict(m), indent=2))
    log(f"{stage}: {json.dumps(asdict(m))}")
    return m


# ---- training ---------------------------------------------------------------------------
def train(
    s: Settings, objective: str, model: Path, data: Path, out: Path, steps: int, batch: int,
    lr: float,
) -> Path:  # fmt: skip
    """``cowork-gym train``; returns the last checkpoint's model folder."""
    status_path = out / "status.json"
    if not (out / ".done").exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        config = {
            "objective": objective,
            "model": str(model),
            "data": [str(data)],
            "out": str(out),
            "max_steps": steps,
            "checkpoint_every": steps,
            "keep_checkpoints": 1,
            "workers": 1,
            "device": s.device,
            # one sequence at a time, gradients accumulated: 8 sequences of ~2,300 tokens in
            # one pass took the 24 GiB machine out of memory (the activations, not the head)
            "hyperparameters": {
                "learning_rate": lr,
                "batch_size": batch,
                "micro_batch_size": 1,
                "warmup_steps": 0,
            },
        }
        (out / "request.json").write_text(json.dumps(config, indent=2))
        run([*CLI, "train", "--config", out / "request.json", "--json"])
        (out / ".done").touch()
    status = json.loads(status_path.read_text())
    checkpoint = status.get("checkpoint")
    if not checkpoint:
        raise RuntimeError(f"{out}: the run left no checkpoint ({status})")
    return Path(checkpoint)


# ---- the report -------------------------------------------------------------------------
def table(rows: list[Measurement]) -> str:
    def f(value: float | None, pattern: str = "{:.3f}") -> str:
        return (
            "-"
            if value is None or (isinstance(value, float) and math.isnan(value))
            else (pattern.format(value))
        )

    lines = [
        "| stage | rollouts | valid | mean reward | pass rate | valid tool calls | mean tool "
        "calls | held-out oracle NLL | terminations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        ended = ", ".join(f"{k} {v}" for k, v in sorted(m.terminations.items()))
        lines.append(
            f"| {m.stage} | {m.rollouts} | {m.valid} | {f(m.mean_reward)} | "
            f"{f(m.pass_rate, '{:.0%}')} | {f(m.valid_call_rate, '{:.0%}')} | "
            f"{m.mean_tool_calls:.1f} | {f(m.heldout_oracle_nll)} | {ended} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "learning")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--train-seeds", type=int, default=4, help="train packages per family")
    parser.add_argument("--heldout-seeds", type=int, default=3, help="held-out per family")
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--sft-batch", type=int, default=1)
    parser.add_argument("--sft-lr", type=float, default=1e-4)
    parser.add_argument("--grpo-samples", type=int, default=4)
    parser.add_argument(
        "--grpo-temperature",
        type=float,
        default=0.6,
        help="the round's sampling temperature (GRPO scores at the same one)",
    )
    parser.add_argument(
        "--grpo-packages", type=int, default=2, help="train packages per family in the round"
    )
    parser.add_argument("--grpo-steps", type=int, default=2)
    parser.add_argument("--grpo-lr", type=float, default=1e-5)
    parser.add_argument("--max-tokens", type=int, default=1536, help="per completion")
    parser.add_argument("--max-steps", type=int, default=6, help="model calls per rollout")
    parser.add_argument("--workers", type=int, default=8, help="parallel rollouts")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (serving and training)")
    parser.add_argument("--smoke", action="store_true", help="one package, one step each")
    parser.add_argument("--fresh", action="store_true", help="discard earlier stages' outputs")
    a = parser.parse_args(argv)
    if a.smoke:
        a.families, a.train_seeds, a.heldout_seeds = "weather_report", 1, 1
        a.sft_steps, a.sft_batch, a.grpo_samples, a.grpo_steps = 1, 1, 2, 1
        a.max_tokens, a.max_steps = 48, 2
    families = [f.strip() for f in a.families.split(",") if f.strip()]
    s = Settings(
        out=a.out.resolve(), families=families,
        train_seeds=list(range(1, a.train_seeds + 1)),
        heldout_seeds=list(range(101, 101 + a.heldout_seeds)),
        sft_steps=a.sft_steps, sft_batch=a.sft_batch, sft_lr=a.sft_lr,
        grpo_samples=a.grpo_samples, grpo_packages=a.grpo_packages,
        grpo_temperature=a.grpo_temperature, grpo_steps=a.grpo_steps,
        grpo_lr=a.grpo_lr,
        max_tokens=a.max_tokens, max_steps=a.max_steps, workers=a.workers, device=a.device,
        smoke=a.smoke,
    )  # fmt: skip
    if a.fresh:
        shutil.rmtree(s.out, ignore_errors=True)
    s.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    from coworkgym_training.pretrained import prepare

    base = prepare(MODEL, say=log)
    train_packages, heldout_packages = synthesize(s)

    # oracle trajectories: the SFT data (train) and the NLL probe (held-out)
    oracle_dir = s.out / "rollouts" / "oracle"
    if not (oracle_dir / ".done").exists():
        run([*CLI, "rollout", *train_packages, *heldout_packages, "--harness", "oracle",
             "--out", oracle_dir])  # fmt: skip
        (oracle_dir / ".done").touch()
    oracle = read_trajectories(oracle_dir / "trajectories.jsonl")
    heldout_names = {p.name for p in heldout_packages}
    heldout_oracle = [t for t in oracle if _package_name(t) in heldout_names]
    train_oracle = s.out / "data" / "sft.jsonl"
    train_oracle.parent.mkdir(parents=True, exist_ok=True)
    run([*CLI, "filter", oracle_dir / "trajectories.jsonl", "--min-reward", "1.0",
         "--out", s.out / "data" / "oracle-passed.jsonl"])  # fmt: skip
    train_oracle.write_text(
        "".join(
            line + "\n"
            for line in (s.out / "data" / "oracle-passed.jsonl").read_text().splitlines()
            if line and _package_name_of_line(line) not in heldout_names
        )
    )

    rows = [evaluate(s, "base", f"pretrained:{MODEL}", base, heldout_packages, heldout_oracle)]

    sft = train(s, "sft", base, train_oracle, s.out / "train-sft", s.sft_steps, s.sft_batch,
                s.sft_lr)  # fmt: skip
    rows.append(evaluate(s, "sft", str(sft), sft, heldout_packages, heldout_oracle))

    # one on-policy GRPO round from the SFT checkpoint, on the train packages
    # the first --grpo-packages train packages of each family
    round_packages = [p for p in train_packages
                      if int(p.name.rsplit("-s", 1)[1]) <= s.grpo_packages]  # fmt: skip
    round_dir = s.out / "rollouts" / f"grpo-round-1-t{s.grpo_temperature}"
    on_policy = rollout(s, str(sft), f"{MODEL}-sft", round_packages, round_dir,
                        samples=s.grpo_samples, temperature=s.grpo_temperature)  # fmt: skip
    grpo_data = s.out / "data" / "grpo.jsonl"
    # A failed attempt that claims its deliverables is a failure to learn from (the verifier
    # scored it), not a record to distrust: dropping it (claim_evidence) kept only the
    # successes of each group, and the weather groups lost their spread.
    run([*CLI, "filter", on_policy, "--out", grpo_data, "--keep-truncated",
         "--skip", "claim_evidence"])  # fmt: skip
    round_measure = measure(
        f"grpo-round-1 (train, T={s.grpo_temperature})", read_trajectories(on_policy)
    )
    log(f"on-policy round: {json.dumps(asdict(round_measure))}")
    try:
        grpo = train(s, "grpo", sft, grpo_data, s.out / "train-grpo", s.grpo_steps,
                     s.grpo_samples * 2, s.grpo_lr)  # fmt: skip
    except subprocess.CalledProcessError:
        status = json.loads((s.out / "train-grpo" / "status.json").read_text())
        if not s.smoke or status.get("reason") != "no_examples":
            raise
        # a 48-token smoke rollout scores 0 every time: no group has spread to train on
        log(f"smoke: no GRPO step ({status.get('message')})")
    else:
        rows.append(evaluate(s, "grpo", str(grpo), grpo, heldout_packages, heldout_oracle))

    elapsed = round(time.monotonic() - started)
    report = {
        "model": MODEL,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
        "train_packages": [p.name for p in train_packages],
        "heldout_packages": sorted(heldout_names),
        "measurements": [asdict(m) for m in rows],
        "grpo_round": asdict(round_measure),
        "wall_s": elapsed,
    }
    (s.out / "results.json").write_text(json.dumps(report, indent=2))
    print(table(rows))
    print(f"on-policy GRPO round on the train packages: {round_measure.rollouts} rollouts, mean "
          f"reward {round_measure.mean_reward}, pass rate {round_measure.pass_rate}")  # fmt: skip
    print(f"wall time {elapsed} s; {s.out / 'results.json'}")
    base_reward, final = rows[0].mean_reward or 0.0, rows[-1].mean_reward or 0.0
    if not s.smoke and final <= base_reward:
        print("held-out reward did not rise above the base model's", file=sys.stderr)
        return 1
    return 0


def _package_name(trajectory: Any) -> str:
    return Path(trajectory.environment.uri or trajectory.environment.name).name


def _package_name_of_line(line: str) -> str:
    from coworkgym.rollout.trajectory import Trajectory

    return _package_name(Trajectory.model_validate_json(line))


if __name__ == "__main__":
    raise SystemExit(main())
