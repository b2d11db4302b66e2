"""The objectives on tiny random models: the GRPO reward and group advantages (invalid
rewards masked, zero-variance groups dropped), collation, SFT on agent tokens only, the
GRPO clipped ratio and KL, OPD's forward KL with and without top-k, and a frozen MoE
router. TRL parity is in test_objectives_trl.py."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

import torch
from pydantic import ValidationError

from coworkgym_training.objectives import (
    GRPOSettings,
    ObjectiveConfig,
    ObjectiveError,
    RewardSettings,
    attach_teacher_topk,
    build_objective,
    examples_from_trajectories,
    freeze_router,
    geometric_reward,
    group_advantages,
    trajectory_reward,
)
from tests.training import objective_data as data
from tests.training import trajectories as make


def grpo_config(**settings: Any) -> ObjectiveConfig:
    return ObjectiveConfig(grpo=GRPOSettings(**settings))


# ---- reward ---------------------------------------------------------------------------
def test_reward_is_the_weighted_geometric_mean_and_zero_when_either_score_is() -> None:
    assert geometric_reward(0.64, 0.25, 1, 1) == pytest.approx(0.4)  # sqrt(0.64 · 0.25)
    assert geometric_reward(0.5, 0.8, 0.7, 0.3) == pytest.approx(0.5**0.7 * 0.8**0.3)
    assert geometric_reward(0.0, 1.0, 0.7, 0.3) == 0.0
    assert geometric_reward(1.0, 0.0, 0.7, 0.3) == 0.0
    # Below the arithmetic mean for an imbalanced pair: the point of the geometric mean.
    assert geometric_reward(0.9, 0.1, 1, 1) < (0.9 + 0.1) / 2


def test_reward_uses_the_verifier_unless_weights_are_set() -> None:
    record = data.rollout("env", 0, 0.3, code=0.5, rubric=0.8)  # 0.3: e.g. a red-line cap
    assert trajectory_reward(record, RewardSettings()).reward == 0.3
    tuned = RewardSettings(code_weight=1, rubric_weight=1)
    assert trajectory_reward(record, tuned).reward == pytest.approx(math.sqrt(0.5 * 0.8))
    no_rubric = data.rollout("env", 0, 0.6, code=0.6)
    assert trajectory_reward(no_rubric, tuned).reward == 0.6  # R = s, as the verifier does


def test_invalid_rewards_have_no_value_and_say_why() -> None:
    outcome = trajectory_reward(data.rollout("env", 0, None), RewardSettings())
    assert outcome.reward is None
    assert outcome.invalid_reason == "invalid verification: verifier crashed"
    unverified = make.two_turns().model_copy(update={"verification": None})
    assert trajectory_reward(unverified, RewardSettings()).invalid_reason == "no verification"


def test_reward_weights_go_together() -> None:
    with pytest.raises(ValidationError, match=r"code_weight and reward\.rubric_weight go together"):
        RewardSettings(code_weight=0.7)


# ---- groups and advantages ------------------------------------------------------------
def test_group_advantages_are_standardized_within_the_group() -> None:
    group = group_advantages([0.0, 0.5, 1.0], GRPOSettings())
    # std (unbiased) = 0.5, plus TRL's epsilon
    assert group.advantages == pytest.approx([-0.5 / 0.5001, 0.0, 0.5 / 0.5001])
    centred = group_advantages([0.0, 0.5, 1.0], GRPOSettings(scale_advantages=False))
    assert centred.advantages == pytest.approx([-0.5, 0.0, 0.5])


def test_zero_variance_groups_are_dropped_within_the_tolerance() -> None:
    settings = GRPOSettings(zero_variance_tolerance=1e-6)
    assert group_advantages([0.7, 0.7 + 1e-9, 0.7], settings).dropped == "zero_variance"
    assert group_advantages([0.7, 0.71], settings).advantages is not None
    assert group_advantages([0.7], settings).dropped == "singleton"


def test_grpo_examples_mask_invalid_rewards_and_drop_flat_groups() -> None:
    trajectories = data.graded(
        {
            "mixed": [1.0, 0.0, None, 0.5],  # None is masked out, not a 0
            "flat": [0.4, 0.4 + 1e-12, 0.4],
            "lonely": [0.9, None],  # one valid member left
        }
    )
    examples, report = examples_from_trajectories(
        trajectories, data.tokenizer(), "grpo", grpo_config()
    )
    assert [e.env_id for e in examples] == ["mixed"] * 3
    # Had the invalid rollout counted as 0, the group would be [1, 0, 0, 0.5].
    assert [e.advantage for e in examples] == pytest.approx([1.0, -1.0, 0.0], rel=1e-3)
    assert report.dropped == {"invalid_reward": 2, "zero_variance_group": 3, "singleton_group": 1}
    assert (report.groups, report.groups_kept) == (3, 1)
    assert (report.groups_zero_variance, report.groups_singleton) == (1, 1)
    assert report.examples == 3 and report.trajectories == 9
    assert report.reward_mean == pytest.approx((1.0 + 0.0 + 0.5 + 0.4 * 3 + 0.9) / 7)
    assert report.agent_tokens == sum(e.agent_tokens for e in examples)
    assert report.agent_tokens_without_behaviour_logprobs == report.agent_tokens


def test_opd_and_unfiltered_sft_examples_ignore_rewards() -> None:
    trajectories = data.graded({"env": [1.0, None, 0.2]})
    keep_all = ObjectiveConfig(sft_min_reward=None)
    for objective, config in (("opd", None), ("sft", keep_all)):
        examples, report = examples_from_trajectories(
            trajectories, data.tokenizer(), objective, config
        )
        assert len(examples) == 3 and report.dropped == {}


def test_recorded_token_logprobs_become_behaviour_logprobs() -> None:
    chat = data.tokenizer()
    sampled = chat.encode(make.FINAL, add_special_tokens=False)
    record = make.two_turns(
        m5={"tokens": {"completion_ids": sampled, "logprobs": [-0.5] * len(sampled)}}
    )
    [example], _ = examples_from_trajectories([record], chat, "sft")
    batch = data.batch_of([example])
    tail = batch["behaviour_logprobs"][0, len(example) - len(sampled) - 1 : len(example) - 1]
    assert tail.tolist() == [-0.5] * len(sampled)
    assert math.isnan(batch["behaviour_logprobs"][0, -1])  # the appended <|im_end|>
    assert batch["target_mask"][0, -1]


# ---- collation ------------------------------------------------------------------------
def test_collate_right_pads_and_never_targets_padding() -> None:
    examples, _ = examples_from_trajectories(
        data.graded({"env": [1.0, 0.0]}), data.tokenizer(), "grpo"
    )
    short = replace(
        examples[1],
        input_ids=examples[1].input_ids[:-5],
        agent_mask=examples[1].agent_mask[:-5],
        behaviour_logprobs=examples[1].behaviour_logprobs[:-5],
    )
    batch = data.batch_of([examples[0], short])
    width = len(examples[0])
    assert batch["input_ids"].shape == (2, width)
    assert batch["attention_mask"][1].tolist() == [1] * len(short) + [0] * (width - len(short))
    assert not batch["target_mask"][1, len(short) :].any()
    assert int(batch["target_mask"].sum()) == examples[0].agent_tokens + short.agent_tokens
    assert batch["advantages"].tolist() == pytest.approx([examples[0].advantage, short.advantage])


# ---- SFT ------------------------------------------------------------------------------
def test_sft_loss_is_cross_entropy_on_agent_tokens_only() -> None:
    examples, _ = examples_from_trajectories(
        data.graded({"env": [1.0, 1.0, 1.0]}), data.tokenizer(), "sft"
    )
    batch = data.batch_of(examples)
    model = data.model(sharp=True)
    loss, metrics = build_objective("sft").loss(model, batch)
    reference = data.full_logprobs(model, batch)
    agent = batch["target_mask"][:, 1:]
    assert loss.item() == pytest.approx(-reference[agent].mean().item(), rel=1e-5)
    every_real_token = batch["attention_mask"][:, 1:].bool()
    assert loss.item() != pytest.approx(-reference[every_real_token].mean().item(), rel=1e-3)
    assert metrics["tokens"] == int(agent.sum())


def test_sft_scores_each_agent_token_from_the_state_before_it() -> None:
    """The usual mask bugs — targets shifted by one, or the end-of-turn token left out —
    give another loss than ours."""
    [example], _ = examples_from_trajectories([make.two_turns()], data.tokenizer(), "sft")
    batch = data.batch_of([example])
    model = data.model(sharp=True)
    loss, _ = build_objective("sft").loss(model, batch)
    reference = data.full_logprobs(model, batch)[0]  # index t-1 scores token t
    targets = example.target_positions
    expected = -reference[[t - 1 for t in targets]].mean().item()
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    shifted = [t for t in targets if t < len(example) - 1]  # token t scored from state t
    assert loss.item() != pytest.approx(-reference[shifted].mean().item(), rel=1e-4)
    end_of_turn = data.tokenizer().convert_tokens_to_ids("<|im_end|>")
    assert [example.input_ids[t] for t in targets].count(end_of_turn) == 2  # both turns end


# ---- GRPO -----------------------------------------------------------------------------
def grpo_batch(**settings: Any) -> tuple[Any, ObjectiveConfig]:
    config = grpo_config(**settings)
    examples, _ = examples_from_trajectories(
        data.graded({"a": [1.0, 0.2, 0.6], "b": [0.0, 0.9]}), data.tokenizer(), "grpo", config
    )
    return data.batch_of(data.behaved(examples, data.model(sharp=True), jitter=0.3)), config


def reference_grpo(model: Any, batch: Any, config: ObjectiveConfig, ref: Any = None) -> float:
    """The GRPO loss written out over the full [B, T] grid."""
    settings = config.grpo
    current = data.full_logprobs(model, batch)
    old = batch["behaviour_logprobs"][:, 1:]
    mask = batch["target_mask"][:, 1:]
    ratio = torch.exp(current - torch.nan_to_num(old))
    advantages = batch["advantages"][:, None]
    low, high = 1 - settings.clip_epsilon_low, 1 + settings.clip_epsilon_high
    per_token = -torch.minimum(ratio * advantages, ratio.clamp(low, high) * advantages)
    if settings.dual_clip_ratio is not None:  # dual clip: A < 0 costs at most −c·A
        cap = -settings.dual_clip_ratio * advantages
        per_token = torch.where(advantages < 0, torch.minimum(per_token, cap), per_token)
    if ref is not None:
        delta = data.full_logprobs(ref, batch) - current
        per_token = per_token + settings.kl_beta * (torch.exp(delta) - delta - 1)
    if settings.loss_aggregation == "token":
        return float(per_token[mask].mean())
    rows = [(per_token[b][mask[b]]).mean() for b in range(mask.shape[0])]
    return float(torch.stack(rows).mean())


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_grpo_loss_is_the_clipped_ratio_objective(aggregation: str, beta: float) -> None:
    batch, config = grpo_batch(loss_aggregation=aggregation, kl_beta=beta, clip_epsilon_low=0.1)
    model, ref = data.model(sharp=True), data.model(seed=2, sharp=True)
    objective = build_objective("grpo", config)
    loss, metrics = objective.loss(model, batch, reference_model=ref if beta else None)
    expected = reference_grpo(model, batch, config, ref if beta else None)
    assert loss.item() == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert 0 < metrics["clip_fraction"] < 1  # the behaviour model differs: some ratios clip
    assert ("kl" in metrics) == bool(beta)


def test_grpo_without_behaviour_logprobs_is_on_policy() -> None:
    """Ratio 1 everywhere: the loss is −mean(A) over tokens and its gradient the plain
    policy gradient −mean(A·∇log π)."""
    config = grpo_config()
    examples, _ = examples_from_trajectories(
        data.graded({"a": [1.0, 0.0, 0.5]}), data.tokenizer(), "grpo", config
    )
    batch = data.batch_of(examples)
    model = data.model()
    loss, metrics = build_objective("grpo", config).loss(model, batch)
    mask = batch["target_mask"][:, 1:]
    tokens_per_row = mask.sum(1).float()
    expected = -(batch["advantages"] * tokens_per_row).sum() / tokens_per_row.sum()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["behaviour_recorded_fraction"] == 0.0


def test_grpo_with_kl_asks_for_the_reference() -> None:
    batch, config = grpo_batch(kl_beta=0.1)
    with pytest.raises(ObjectiveError, match="pass reference_model"):
        build_objective("grpo", config).loss(data.model(), batch)


def test_unknown_objective_is_refused() -> None:
    with pytest.raises(ObjectiveError, match="unknown objective 'ppo'"):
        build_objective("ppo")  # type: ignore[arg-type]


# ---- MoE router -----------------------------------------------------------------------
def tiny_moe() -> Any:
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=len(data.tokenizer()),
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_experts=4,
        num_experts_per_tok=2,
    )
    return Qwen3MoeForCausalLM(config)


def test_grpo_freezes_the_moe_router_and_trains_the_experts() -> None:
    model = tiny_moe()
    frozen = build_objective("grpo").prepare(model)
    assert frozen == ["model.layers.0.mlp.gate.weight", "model.layers.1.mlp.gate.weight"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    examples, _ = examples_from_trajectories(
        data.graded({"a": [1.0, 0.0, 0.5]}), data.tokenizer(), "grpo"
    )
    batch = data.batch_of(data.behaved(examples, data.model(seed=1)))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    loss, _ = build_objective("grpo").loss(model, batch)
    loss.backward()
    optimizer.step()
    for name, parameter in model.named_parameters():
        moved = not torch.equal(before[name], parameter.detach())
        assert moved == (name not in frozen), name
    assert build_objective("sft").prepare(tiny_moe()) == []  # SFT trains the router


def test_dense_models_and_other_moe_families() -> None:
    from transformers import MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM

    assert freeze_router(data.model()) == []
    shape = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1}
    heads = {"num_attention_heads": 2, "num_key_value_heads": 1, "num_experts_per_tok": 2}
    mixtral = MixtralForCausalLM(MixtralConfig(**shape, **heads, num_local_experts=4))
    assert freeze_router(mixtral) == ["model.layers.0.mlp.gate.weight"]
    qwen2 = Qwen2MoeForCausalLM(
        Qwen2MoeConfig(
            **shape, **heads, num_experts=4, moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
        )
    )
    assert freeze_router(qwen2) == [
        "model.layers.0.mlp.gate.weight",
        "model.layers.0.mlp.shared_expert_gate.weight",
    ]


# ---- OPD ------------------------------------------------------------------------------
def opd_batch() -> tuple[list[Any], Any]:
    examples, _ = examples_from_trajectories(
        data.graded({"a": [1.0, 0.0]}), data.tokenizer(), "opd"
    )
    return examples, data.batch_of(examples)


@torch.no_grad()
def reference_kl(teacher: Any, student: Any, batch: Any) -> float:
    mask = batch["target_mask"][:, 1:]
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    t = torch.log_softmax(teacher(**inputs).logits[:, :-1][mask].float(), -1)
    s = torch.log_softmax(student(**inputs).logits[:, :-1][mask].float(), -1)
    # torch's kl_div(input=log q, target=log p, log_target) is Σ p (log p − log q) = KL(p ‖ q)
    return float(torch.nn.functional.kl_div(s, t, log_target=True, reduction="batchmean"))


def test_opd_is_the_forward_kl_from_the_teacher() -> None:
    _, batch = opd_batch()
    student, teacher = data.model(), data.model(seed=3)
    loss, metrics = build_objective("opd").loss(student, batch, teacher_model=teacher)
    assert loss.item() == pytest.approx(reference_kl(teacher, student, batch), rel=1e-4)
    assert loss.item() > 0
    same, _ = build_objective("opd").loss(student, batch, teacher_model=data.model())
    assert same.item() == pytest.approx(0.0, abs=1e-6)
    assert metrics["tokens"] == int(batch["target_mask"].sum())


def test_opd_forward_kl_is_not_the_reverse() -> None:
    _, batch = opd_batch()
    student, teacher = data.model(), data.model(seed=3, sharp=True)  # the directions differ
    loss, _ = build_objective("opd").loss(student, batch, teacher_model=teacher)
    assert loss.item() != pytest.approx(reference_kl(student, teacher, batch), rel=1e-3)


def test_opd_top_k_over_the_whole_vocabulary_is_the_full_kl() -> None:
    _, batch = opd_batch()
    student, teacher = data.model(), data.model(seed=3)
    full, _ = build_objective("opd").loss(student, batch, teacher_model=teacher)
    vocab = len(data.tokenizer())
    config = ObjectiveConfig.model_validate({"opd": {"top_k": vocab}})
    everything, _ = build_objective("opd", config).loss(student, batch, teacher_model=teacher)
    assert everything.item() == pytest.approx(full.item(), rel=1e-5)
    few = ObjectiveConfig.model_validate({"opd": {"top_k": 4}})
    truncated, _ = build_objective("opd", few).loss(student, batch, teacher_model=teacher)
    assert truncated.item() > 0 and truncated.item() != pytest.approx(full.item(), rel=1e-3)


def test_opd_with_stored_teacher_top_k_needs_no_teacher() -> None:
    examples, batch = opd_batch()
    student, teacher = data.model(), data.model(seed=3)
    config = ObjectiveConfig.model_validate({"opd": {"top_k": 8}})
    live, _ = build_objective("opd", config).loss(student, batch, teacher_model=teacher)
    pad = data.tokenizer().pad_token_id
    stored = attach_teacher_topk(examples, teacher, top_k=8, pad_id=pad, batch_size=1)
    assert stored[0].teacher_topk_ids is not None
    assert len(stored[0].teacher_topk_ids) == examples[0].agent_tokens
    offline, _ = build_objective("opd", config).loss(student, data.batch_of(stored))
    assert offline.item() == pytest.approx(live.item(), rel=1e-5)


def test_opd_gradient_reaches_the_student_only() -> None:
    _, batch = opd_batch()
    student, teacher = data.model(), data.model(seed=3)
    loss, _ = build_objective("opd").loss(student, batch, teacher_model=teacher)
    loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in student.parameters())


def test_opd_refuses_a_missing_teacher() -> None:
    _, batch = opd_batch()
    with pytest.raises(ObjectiveError, match="opd needs the teacher"):
        build_objective("opd").loss(data.model(), batch)


# ---- heads ----------------------------------------------------------------------------
class Wrapped(torch.nn.Module):
    """A model behind a plain forward (as an FSDP root is): no config, no base_model."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)


@pytest.mark.parametrize("objective", ["sft", "grpo"])
def test_a_wrapped_model_gives_the_same_loss_through_its_own_forward(objective: str) -> None:
    batch, config = grpo_batch()
    model = data.model(sharp=True)
    direct, _ = build_objective(objective, config).loss(model, batch)  # type: ignore[arg-type]
    wrapped, _ = build_objective(objective, config).loss(Wrapped(model), batch)  # type: ignore[arg-type]
    assert wrapped.item() == pytest.approx(direct.item(), rel=1e-5)


def test_a_soft_capped_head_is_scored_like_the_model_scores_it() -> None:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    gemma = Gemma2ForCausalLM(
        Gemma2Config(
            vocab_size=len(data.tokenizer()), hidden_size=32, intermediate_size=64,
            num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
            final_logit_softcapping=5.0,
        )
    )
    with torch.no_grad():
        gemma.lm_head.weight.mul_(30)  # logits well past the cap
    examples, _ = examples_from_trajectories([make.two_turns()], data.tokenizer(), "sft")
    batch = data.batch_of(examples)
    loss, _ = build_objective("sft").loss(gemma, batch)
    reference = data.full_logprobs(gemma, batch)[batch["target_mask"][:, 1:]]
    assert loss.item() == pytest.approx(-reference.mean().item(), rel=1e-4)


def test_sft_accuracy_is_the_share_of_targets_the_model_ranks_first() -> None:
    examples, _ = examples_from_trajectories([make.two_turns()], data.tokenizer(), "sft")
    batch = data.batch_of(examples)
    model = data.model(sharp=True)
    _, metrics = build_objective("sft").loss(model, batch)
    mask = batch["target_mask"][:, 1:]
    logits = model(input_ids=batch["input_ids"]).logits[:, :-1][mask]
    expected = (logits.argmax(-1) == batch["input_ids"][:, 1:][mask]).float().mean().item()
    assert metrics["accuracy"] == pytest.approx(expected)
    _, wrapped = build_objective("sft").loss(Wrapped(model), batch)
    assert wrapped["accuracy"] == pytest.approx(expected)
