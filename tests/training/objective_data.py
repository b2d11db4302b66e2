"""Trajectories, examples and batches for the objective tests.

``graded`` builds GRPO groups: one environment package per group name, one two-turn
rollout per reward (None: an invalid verification), each with its own final message so
the sequences differ. ``behaved`` gives examples behaviour log-probs near a model's own,
as if a slightly older policy had sampled them, so policy ratios are not all 1.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import torch

from coworkgym.rollout.trajectory import Trajectory
from coworkgym_training.objectives import TrainExample, collate
from coworkgym_training.objectives.batching import Batch
from tests.training import builders
from tests.training import trajectories as make

STYLE = "chatml"

# The models are tiny: one intra-op thread is faster than several fighting over a shared
# machine's cores (twenty times so under load), and makes the timings steady.
torch.set_num_threads(1)


def verification(
    reward: float | None, *, code: float | None = None, rubric: float | None = None
) -> dict[str, Any]:
    if reward is None:
        return {"valid": False, "invalid_reason": "verifier crashed"}
    return {
        "valid": True,
        "reward": reward,
        "code_score": reward if code is None else code,
        "rubric_score": rubric,
    }


def rollout(group: str, sample: int, reward: float | None, **scores: float | None) -> Trajectory:
    trajectory = make.two_turns(
        sample=sample, m5={"content": f"{make.FINAL} Version {sample} of {group}."}
    )
    data = trajectory.model_dump(mode="json")
    digest = "sha256:" + hashlib.sha256(group.encode()).hexdigest()
    data["key"]["package_digest"] = digest
    data["environment"].update(name=group, digest=digest)
    data["verification"] = verification(reward, **scores)
    return Trajectory.model_validate(data)


def graded(groups: dict[str, list[float | None]]) -> list[Trajectory]:
    return [
        rollout(name, sample, reward)
        for name, rewards in groups.items()
        for sample, reward in enumerate(rewards)
    ]


def tokenizer() -> Any:
    return builders.tokenizer(STYLE)


def model(seed: int = 0, *, sharp: bool = False) -> Any:
    """A tiny random Llama; `sharp` scales its head so its next-token distributions are
    peaked (a random one is near uniform: every token costs about log V, and a loss on
    the wrong tokens would look the same as one on the right ones)."""
    built = builders.tiny_model(len(tokenizer()), seed)
    if sharp:
        with torch.no_grad():
            built.lm_head.weight.mul_(30)
    return built


@torch.no_grad()
def behaved(
    examples: list[TrainExample], behaviour_model: Any, *, jitter: float = 0.0, seed: int = 0
) -> list[TrainExample]:
    """`examples` with the log-probs `behaviour_model` gives their agent tokens, each moved
    by Gaussian noise of std `jitter`: a policy a few updates away from the current one
    (policy ratios exp(±jitter), some outside the clip range)."""
    noise = torch.Generator().manual_seed(seed)
    out = []
    for example in examples:
        ids = torch.tensor([example.input_ids])
        logprobs = torch.log_softmax(behaviour_model(input_ids=ids).logits[0].float(), -1)
        recorded: list[float | None] = [None] * len(example)
        for t in example.target_positions:
            shift = float(torch.randn((), generator=noise)) * jitter
            recorded[t] = float(logprobs[t - 1, example.input_ids[t]]) + shift
        out.append(replace(example, behaviour_logprobs=recorded))
    return out


def batch_of(examples: list[TrainExample]) -> Batch:
    pad = tokenizer().pad_token_id
    assert isinstance(pad, int)
    return collate(examples, pad)


@torch.no_grad()
def full_logprobs(model: Any, batch: Batch) -> torch.Tensor:
    """log π(token t | tokens < t) at every position, [B, T-1] (index t-1), by the model's
    own forward over the whole vocabulary: the reference the losses are checked against."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logprobs = torch.log_softmax(logits[:, :-1].float(), -1)
    return logprobs.gather(2, batch["input_ids"][:, 1:, None])[..., 0]


def trl_inputs(batch: Batch) -> Batch:
    """Our batch in TRL's layout: the shared context as the prompt, the rest as the
    completion, the agent mask as ``tool_mask``."""
    first = int(batch["target_mask"].float().argmax(1).min())
    prompts = batch["input_ids"][:, :first]
    assert (prompts == prompts[0]).all(), "the rows must share their context (a GRPO group)"
    completion_mask = batch["attention_mask"][:, first:]
    return {
        "prompt_ids": prompts,
        "prompt_mask": batch["attention_mask"][:, :first],
        "completion_ids": batch["input_ids"][:, first:],
        "completion_mask": completion_mask,
        "tool_mask": batch["target_mask"][:, first:].long(),
        "advantages": batch["advantages"],
        # TRL multiplies before masking: masked positions must be finite.
        "old_per_token_logps": torch.nan_to_num(batch["behaviour_logprobs"][:, first:]),
        "num_items_in_batch": batch["target_mask"].sum(),
    }
