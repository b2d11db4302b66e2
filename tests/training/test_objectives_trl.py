"""Parity with TRL (trl==1.16.0): our SFT loss equals SFTTrainer.compute_loss with a
completion mask, and our GRPO loss equals GRPOTrainer's loss computation (its
``_compute_loss``, fed the same advantages, old log-probs, clip range, β and reference
log-probs) on the same tiny model and batch. Agent trajectories interleave tool output
with the policy's tokens, which TRL expresses as a completion with a ``tool_mask``; the
trajectories here share their context up to the first agent token, as a GRPO group does,
so TRL's prompt/completion split has no left padding."""

from __future__ import annotations

import copy
import tempfile
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("trl", reason="needs the training extra: make install-training")

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer
from trl.trainer.utils import add_fused_lm_head

from coworkgym_training.objectives import (
    GRPOSettings,
    ObjectiveConfig,
    build_objective,
    examples_from_trajectories,
)
from tests.training import objective_data as data

# transformers 5.24 warns about a deprecated alias TRL's configs still set.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`gradient_checkpointing.*` is deprecated:FutureWarning"
)

GROUPS: dict[str, list[float | None]] = {"a": [1.0, 0.2, 0.6], "b": [0.0, 0.9]}


def sft_trainer(model: Any, rows: list[dict[str, Any]]) -> SFTTrainer:
    args = SFTConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=len(rows),
        completion_only_loss=True,
        max_length=None,
        report_to=[],
        use_cpu=True,
        bf16=False,
    )
    dataset = Dataset.from_list(rows)
    return SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=data.tokenizer()
    )


def test_sft_loss_equals_trl_sft_trainer_with_a_completion_mask() -> None:
    examples, _ = examples_from_trajectories(
        data.graded({"env": [1.0, 1.0, 1.0]}), data.tokenizer(), "sft"
    )
    model = data.model(sharp=True)
    ours, _ = build_objective("sft").loss(model, data.batch_of(examples))

    rows = [
        {"input_ids": e.input_ids, "completion_mask": [int(m) for m in e.agent_mask]}
        for e in examples
    ]
    trainer = sft_trainer(copy.deepcopy(model), rows)
    trainer.model.train()
    inputs = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
    theirs = trainer.compute_loss(trainer.model, inputs)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)

    # The same trainer with every token as a target (the mask gone) gives another loss.
    everything = [{**r, "completion_mask": [1] * len(r["input_ids"])} for r in rows]
    unmasked = sft_trainer(copy.deepcopy(model), everything)
    unmasked.model.train()
    inputs = unmasked.data_collator([unmasked.train_dataset[i] for i in range(len(rows))])
    unmasked_loss = unmasked.compute_loss(unmasked.model, inputs).item()
    assert unmasked_loss != pytest.approx(ours.item(), rel=1e-3)


def grpo_trainer(
    model: Any, *, loss_type: str, eps_low: float, eps_high: float, temperature: float
) -> GRPOTrainer:
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=4,
        num_generations=4,
        beta=0.0,  # β is set after construction: with β > 0 TRL would load a reference by name
        loss_type=loss_type,
        epsilon=eps_low,
        epsilon_high=eps_high,
        temperature=temperature,
        use_bias_correction_kl=False,  # ours is the plain k3 estimator, as TRL's was before
        report_to=[],
        use_cpu=True,
        bf16=False,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "."}] * 4),
        processing_class=data.tokenizer(),
    )
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train otherwise
    trainer.model.train()
    return trainer


@pytest.mark.parametrize(
    ("loss_type", "aggregation", "beta", "temperature"),
    [
        ("bnpo", "token", 0.0, 1.0),
        ("dapo", "token", 0.04, 1.0),
        ("grpo", "sequence", 0.04, 0.7),
    ],
)
def test_grpo_loss_equals_trl_grpo_trainer(
    loss_type: str, aggregation: str, beta: float, temperature: float
) -> None:
    settings = GRPOSettings.model_validate(
        {
            "loss_aggregation": aggregation,
            "kl_beta": beta,
            "clip_epsilon_low": 0.1,
            "clip_epsilon_high": 0.3,
        }
    )
    config = ObjectiveConfig(temperature=temperature, grpo=settings)
    examples, _ = examples_from_trajectories(data.graded(GROUPS), data.tokenizer(), "grpo", config)
    batch = data.batch_of(data.behaved(examples, data.model(sharp=True), jitter=0.3))
    model, reference = data.model(sharp=True), data.model(seed=2, sharp=True)
    ours, metrics = build_objective("grpo", config).loss(model, batch, reference_model=reference)
    assert 0 < metrics["clip_fraction"] < 1  # the clip is exercised
    assert metrics["dual_clip_fraction"] == 0  # TRL has no dual clip: it must not bind here

    trainer = grpo_trainer(
        copy.deepcopy(model),
        loss_type=loss_type,
        eps_low=0.1,
        eps_high=0.3,
        temperature=temperature,
    )
    inputs = data.trl_inputs(batch)
    if beta:
        trainer.beta = beta
        ref = copy.deepcopy(reference)
        add_fused_lm_head(ref, temperature=temperature)
        input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
        with torch.no_grad():
            inputs["ref_per_token_logps"], _, _ = trainer._get_per_token_logps_and_entropies(
                ref, input_ids, attention, inputs["completion_ids"].shape[1]
            )
    theirs = trainer._compute_loss(trainer.model, inputs)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-4, abs=1e-6)

    # Without the agent mask TRL would train on the tool output too: another loss.
    inputs.pop("tool_mask")
    unmasked = trainer._compute_loss(trainer.model, inputs).item()
    assert unmasked != pytest.approx(ours.item(), rel=1e-3)


def test_grpo_gradients_equal_trl() -> None:
    """Not just the value: the same gradient on every parameter."""
    config = ObjectiveConfig(grpo=GRPOSettings(clip_epsilon_low=0.1, clip_epsilon_high=0.3))
    examples, _ = examples_from_trajectories(data.graded(GROUPS), data.tokenizer(), "grpo", config)
    batch = data.batch_of(data.behaved(examples, data.model(sharp=True), jitter=0.3))
    model = data.model(sharp=True)
    twin = copy.deepcopy(model)
    build_objective("grpo", config).loss(model, batch)[0].backward()
    trainer = grpo_trainer(twin, loss_type="bnpo", eps_low=0.1, eps_high=0.3, temperature=1.0)
    trainer._compute_loss(trainer.model, data.trl_inputs(batch)).backward()
    pairs = zip(model.named_parameters(), twin.named_parameters(), strict=True)
    for (name, ours), (_, theirs) in pairs:
        assert ours.grad is not None and theirs.grad is not None, name
        scale = float(theirs.grad.abs().max())
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5 * scale)
