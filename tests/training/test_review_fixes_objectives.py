"""Review fixes in tokenization and the objectives: a reply cut off by max_tokens has no
end-of-turn target; the prompt is rendered with the tools the trajectory recorded; GRPO's
ratio is guarded (log-ratio clamp, dual clip); the temperature comes from the
trajectories; advantages divide by std + 1e-4; duplicate ids are dropped; SFT keeps the
verifier's passes; GRPO without a usable group says why."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

import torch
from pydantic import ValidationError

from coworkgym.rollout.trajectory import Trajectory
from coworkgym_training.objectives import (
    GRPOSettings,
    ObjectiveConfig,
    ObjectiveError,
    TrainExample,
    attach_teacher_topk,
    build_objective,
    collate,
    examples_from_trajectories,
    group_advantages,
    no_usable_group_reason,
)
from coworkgym_training.objectives.logprobs import target_logits, target_logprobs
from coworkgym_training.objectives.reward import DEFAULT_PASS_THRESHOLD
from coworkgym_training.tokenize import tokenize_trajectory
from tests.training import builders
from tests.training import objective_data as data
from tests.training import trajectories as make

STYLES = sorted(builders.STYLES)


def changed(trajectory: Trajectory, **fields: Any) -> Trajectory:
    """`trajectory` with top-level fields replaced (``policy``/``key`` merged)."""
    raw = trajectory.model_dump(mode="json")
    for name, value in fields.items():
        if isinstance(value, dict) and isinstance(raw.get(name), dict):
            raw[name].update(value)
        else:
            raw[name] = value
    return Trajectory.model_validate(raw)


def sampled_at(trajectory: Trajectory, temperature: float | None) -> Trajectory:
    sampling = {} if temperature is None else {"temperature": temperature}
    return changed(trajectory, policy={"sampling": sampling})


def with_final_tokens(trajectory: Trajectory, record: dict[str, Any]) -> Trajectory:
    messages = [m.model_dump(mode="json") for m in trajectory.messages]
    messages[-1]["tokens"] = record
    return changed(trajectory, messages=messages)


def under(trajectory: Trajectory, harness: str) -> Trajectory:
    return changed(trajectory, key={"harness": harness}, policy={"harness": harness})


class Wrapped(torch.nn.Module):
    """A model behind a plain forward (no config): the full-logits path."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)


# ---- 1. a reply cut off by max_tokens ---------------------------------------------------
def eos_id(style: str) -> int:
    found = builders.tokenizer(style).convert_tokens_to_ids(builders.STYLES[style]["eos"])
    assert isinstance(found, int)
    return found


@pytest.mark.parametrize("style", STYLES)
def test_a_recorded_reply_cut_off_by_max_tokens_gets_no_end_of_turn_target(style: str) -> None:
    tokenizer = builders.tokenizer(style)
    content = tokenizer.encode(make.FINAL, add_special_tokens=False)
    record = {"completion_ids": content, "logprobs": [-0.5] * len(content)}
    stopped = tokenize_trajectory(make.two_turns(m5={"tokens": record}), tokenizer)
    cut = tokenize_trajectory(
        make.two_turns(m5={"tokens": record, "finish_reason": "length"}), tokenizer
    )
    # The server stopped on max_tokens: no end-of-turn the policy never produced.
    assert stopped.input_ids[-1] == eos_id(style) and stopped.agent_mask[-1]
    assert cut.input_ids == stopped.input_ids[:-1]
    assert cut.input_ids[-len(content) :] == content
    assert cut.behaviour_logprobs[-len(content) :] == [-0.5] * len(content)
    assert cut.agent_tokens == stopped.agent_tokens - 1


@pytest.mark.parametrize("style", STYLES)
def test_a_template_rendered_cut_off_reply_does_not_target_the_templates_end_of_turn(
    style: str,
) -> None:
    tokenizer = builders.tokenizer(style)
    stopped = tokenize_trajectory(make.two_turns(), tokenizer)
    cut = tokenize_trajectory(make.two_turns(m5={"finish_reason": "length"}), tokenizer)
    assert stopped.input_ids[-1] == eos_id(style) and stopped.agent_mask[-1]
    assert cut.input_ids == stopped.input_ids[:-1]
    assert cut.agent_mask == stopped.agent_mask[:-1]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("recorded", [False, True])
def test_an_earlier_cut_off_reply_is_closed_as_context(style: str, recorded: bool) -> None:
    """The next call's prompt closes the cut-off reply with the template's end-of-turn: the
    sequence keeps that token (the policy saw it) but does not train on it."""
    tokenizer = builders.tokenizer(style)
    first = tokenize_trajectory(make.two_turns(), tokenizer)
    span = next(s for s in first.spans if s.message == 2)
    changes: dict[str, Any] = {"finish_reason": "length"}
    if recorded:  # the reply's ids without the end-of-turn, as a server cut off returns them
        changes["tokens"] = {"completion_ids": first.input_ids[span.start : span.end - 1]}
    cut = tokenize_trajectory(make.two_turns(m2=changes), tokenizer)
    assert cut.input_ids == first.input_ids
    eot = span.end - 1
    assert first.agent_mask[eot] and not cut.agent_mask[eot]
    assert cut.agent_mask[:eot] == first.agent_mask[:eot]
    assert cut.agent_mask[eot + 1 :] == first.agent_mask[eot + 1 :]


# ---- 2. the tools the trajectory recorded ------------------------------------------------
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def test_the_prompt_is_rendered_with_the_tools_the_trajectory_recorded() -> None:
    tokenizer = builders.tokenizer("chatml")
    offered = changed(make.two_turns(), tools=TOOLS)
    default = tokenize_trajectory(offered, tokenizer)
    assert default.input_ids == tokenize_trajectory(offered, tokenizer, tools=TOOLS).input_ids
    prompt = str(tokenizer.decode(default.input_ids[: default.spans[0].end]))
    assert "Tools: " in prompt and '"read_file"' in prompt
    bare = tokenize_trajectory(offered, tokenizer, tools=[])  # an explicit choice wins
    assert "Tools: " not in str(tokenizer.decode(bare.input_ids))
    # An old record without tools renders as before.
    assert tokenize_trajectory(make.two_turns(), tokenizer).input_ids == bare.input_ids


# ---- 3. GRPO's ratio guard -----------------------------------------------------------------
def far_off_policy_batch(behaviour: float) -> Any:
    """Two rows of one group (A = +1, −1), behaviour log-probs the current policy's, except
    one token of the negative row, the one the policy finds likeliest, recorded at
    `behaviour` (NaN: not recorded, on-policy)."""
    examples, _ = examples_from_trajectories(
        data.graded({"a": [1.0, 0.0]}), data.tokenizer(), "grpo", ObjectiveConfig()
    )
    examples = [replace(e, advantage=a) for e, a in zip(examples, (1.0, -1.0), strict=True)]
    near = data.behaved(examples, data.model(sharp=True))
    negative = near[1]
    logprobs = list(negative.behaviour_logprobs)
    recorded = {t: lp for t in negative.target_positions if (lp := logprobs[t]) is not None}
    likeliest = max(recorded, key=recorded.__getitem__)
    assert recorded[likeliest] > -5.0  # so ρ = exp(ℓ + 20) is at least e^15
    logprobs[likeliest] = None if math.isnan(behaviour) else behaviour
    return data.batch_of([near[0], replace(negative, behaviour_logprobs=logprobs)])


def loss_and_grad_norm(config: ObjectiveConfig, batch: Any) -> tuple[float, float, Any]:
    model = data.model(sharp=True)
    loss, metrics = build_objective("grpo", config).loss(model, batch)
    loss.backward()  # type: ignore[no-untyped-call]
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    return loss.item(), float(norm), metrics


def test_a_token_the_behaviour_policy_found_very_unlikely_cannot_blow_up_grpo() -> None:
    """The review's reproduction: behaviour log-prob −20 in a negative-advantage row."""
    batch = far_off_policy_batch(-20.0)
    on_policy_loss, on_policy_norm, _ = loss_and_grad_norm(
        ObjectiveConfig(), far_off_policy_batch(float("nan"))
    )
    loss, norm, metrics = loss_and_grad_norm(ObjectiveConfig(), batch)
    tokens = metrics["tokens"]
    # The capped token costs at most c·|A| = 3, spread over the batch's tokens.
    assert abs(loss - on_policy_loss) <= 3.0 / tokens + 1e-4
    assert norm < 10 * on_policy_norm
    assert metrics["dual_clip_fraction"] == pytest.approx(1 / tokens)
    assert metrics["ratio_max"] > 1e3
    # Unguarded (no dual clip), the same token dominates the loss and its gradient.
    unguarded = ObjectiveConfig(grpo=GRPOSettings(dual_clip_ratio=None))
    big_loss, big_norm, _ = loss_and_grad_norm(unguarded, batch)
    assert big_loss > 100 * max(abs(loss), 1.0) and big_norm > 100 * norm


def test_the_log_ratio_is_clamped_before_exp() -> None:
    unguarded = ObjectiveConfig(grpo=GRPOSettings(dual_clip_ratio=None))
    loss, norm, metrics = loss_and_grad_norm(unguarded, far_off_policy_batch(-1e4))
    assert math.isfinite(loss) and math.isfinite(norm)
    assert metrics["ratio_max"] == pytest.approx(math.exp(20.0), rel=1e-3)
    assert metrics["log_ratio_clamped_fraction"] == pytest.approx(1 / metrics["tokens"])


def test_the_dual_clip_ratio_must_exceed_one() -> None:
    with pytest.raises(ValidationError, match="greater than 1"):
        GRPOSettings(dual_clip_ratio=1.0)
    assert GRPOSettings().dual_clip_ratio == 3.0 and GRPOSettings().log_ratio_clamp == 20.0


# ---- 4. the temperature the trajectories were sampled at ------------------------------------
def test_the_temperature_defaults_to_the_trajectories_sampling_one() -> None:
    assert ObjectiveConfig().temperature is None
    trajectories = [sampled_at(t, 0.7) for t in data.graded({"a": [1.0, 1.0]})]
    examples, report = examples_from_trajectories(trajectories, data.tokenizer(), "sft")
    assert [e.temperature for e in examples] == [0.7, 0.7]
    assert report.temperature == 0.7 and report.sampling_temperatures == {"0.7": 2}
    model = data.model(sharp=True)
    # advantages and (older-policy) behaviour log-probs, so GRPO's loss is not ρ = 1
    signed = [replace(e, advantage=a) for e, a in zip(examples, (1.0, -1.0), strict=True)]
    batch = data.batch_of(data.behaved(signed, data.model(seed=1, sharp=True)))
    at = ObjectiveConfig(temperature=0.7)
    for objective in ("sft", "grpo"):
        default, _ = build_objective(objective).loss(model, batch)
        explicit, _ = build_objective(objective, at).loss(model, batch)
        assert default.item() == pytest.approx(explicit.item(), rel=1e-6)
        untempered = ObjectiveConfig(temperature=1.0)
        plain, _ = build_objective(objective, untempered).loss(model, batch)
        assert plain.item() != pytest.approx(default.item(), rel=1e-3)
    teacher = data.model(seed=1, sharp=True)
    opd, _ = build_objective("opd").loss(model, batch, teacher_model=teacher)
    opd_at, _ = build_objective("opd", ObjectiveConfig(temperature=0.7)).loss(
        model, batch, teacher_model=teacher
    )
    assert opd.item() == pytest.approx(opd_at.item(), rel=1e-6)
    stored = attach_teacher_topk(examples, teacher, top_k=4, pad_id=0)
    stored_at = attach_teacher_topk(examples, teacher, top_k=4, pad_id=0, temperature=0.7)
    assert stored[0].teacher_topk_logprobs == stored_at[0].teacher_topk_logprobs


def test_a_trajectory_without_a_recorded_temperature_is_scored_at_one() -> None:
    replay = sampled_at(make.two_turns(), None)
    examples, report = examples_from_trajectories([replay], data.tokenizer(), "sft")
    assert examples[0].temperature == 1.0
    assert report.temperature == 1.0 and report.sampling_temperatures == {"unrecorded": 1}
    greedy = sampled_at(make.two_turns(), 0.0)  # no tempered distribution to match
    assert examples_from_trajectories([greedy], data.tokenizer(), "sft")[0][0].temperature == 1.0


@pytest.mark.parametrize("wrapped", [False, True])
def test_rows_at_different_temperatures_are_each_scored_at_their_own(wrapped: bool) -> None:
    trajectories = data.graded({"a": [1.0, 1.0]})
    cold, hot = (sampled_at(t, T) for t, T in zip(trajectories, (0.5, 1.3), strict=True))
    examples, report = examples_from_trajectories([cold, hot], data.tokenizer(), "sft")
    assert [e.temperature for e in examples] == [0.5, 1.3]
    assert report.temperature is None and "several temperatures" in report.warnings[0]
    inner = data.model(sharp=True)
    model = Wrapped(inner) if wrapped else inner
    together = target_logprobs(model, data.batch_of(examples), top1=True)
    logits = target_logits(model, data.batch_of(examples)).logits
    alone = [target_logprobs(model, data.batch_of([e]), top1=True) for e in examples]
    assert torch.allclose(together.logprobs, torch.cat([a.logprobs for a in alone]), atol=1e-5)
    assert together.is_top1 is not None
    assert torch.equal(together.is_top1, torch.cat([a.is_top1 for a in alone]))  # type: ignore[misc]
    alone_logits = [target_logits(model, data.batch_of([e])).logits for e in examples]
    assert torch.allclose(logits, torch.cat(alone_logits), atol=1e-4)
    # and the per-row temperatures do reach the logits: 0.5 is not 1.3
    assert not torch.allclose(alone[0].logprobs, target_logprobs(
        model, data.batch_of([replace(examples[0], temperature=1.3)])
    ).logprobs, atol=1e-3)  # fmt: skip


def test_grpo_refuses_trajectories_sampled_at_several_temperatures() -> None:
    trajectories = data.graded({"a": [1.0, 0.0], "b": [0.5, 0.2]})
    mixed = [sampled_at(t, 0.7 if i < 2 else None) for i, t in enumerate(trajectories)]
    with pytest.raises(ObjectiveError, match=r"several temperatures: 0\.7 \(2\), 1\.0 \(2\)") as e:
        examples_from_trajectories(mixed, data.tokenizer(), "grpo")
    assert "objective_options.temperature" in str(e.value) and "split the data" in str(e.value)
    chosen = ObjectiveConfig(temperature=0.7)
    examples, report = examples_from_trajectories(mixed, data.tokenizer(), "grpo", chosen)
    assert {e.temperature for e in examples} == {0.7} and report.temperature == 0.7


def test_an_explicit_temperature_wins_but_the_report_says_it_differs() -> None:
    tokenizer = data.tokenizer()
    ids = tokenizer.encode(make.FINAL, add_special_tokens=False)
    record = {"completion_ids": ids, "logprobs": [-0.5] * len(ids)}
    trajectories = [sampled_at(data.rollout("a", i, r), 0.7) for i, r in enumerate((1.0, 0.0))]
    with_logprobs = [with_final_tokens(t, record) for t in trajectories]
    config = ObjectiveConfig(temperature=1.0)
    examples, report = examples_from_trajectories(with_logprobs, tokenizer, "grpo", config)
    assert {e.temperature for e in examples} == {1.0} and report.temperature == 1.0
    assert len(report.warnings) == 1
    assert "sampled at 0.7 (2)" in report.warnings[0] and "setting wins" in report.warnings[0]
    # Without recorded behaviour log-probs there is no ratio to compare: no warning.
    _, quiet = examples_from_trajectories(trajectories, tokenizer, "grpo", config)
    assert quiet.warnings == []


def test_a_train_example_built_directly_is_scored_at_one() -> None:
    example = TrainExample("t", [1, 2, 3], [False, True, True], [None] * 3, "e", "g")
    assert example.temperature == 1.0
    assert collate([example], pad_id=0)["temperature"].tolist() == [1.0]


# ---- 5. advantages: std + epsilon -------------------------------------------------------------
def test_group_advantages_divide_by_the_std_plus_trls_epsilon() -> None:
    std = math.sqrt(0.5)  # unbiased std of [0, 1]
    advantages = group_advantages([0.0, 1.0], GRPOSettings()).advantages
    assert advantages == pytest.approx([-0.5 / (std + 1e-4), 0.5 / (std + 1e-4)], rel=1e-9)
    # A spread just above the tolerance no longer gives unit advantages from noise.
    tiny = group_advantages([0.5, 0.5 + 3e-6], GRPOSettings()).advantages
    assert tiny is not None and max(abs(a) for a in tiny) < 0.02


# ---- 6. duplicate trajectory ids --------------------------------------------------------------
def test_a_repeated_trajectory_id_is_dropped_and_the_first_kept() -> None:
    first, other = data.graded({"a": [1.0, 0.0]})
    again = changed(first, messages=[m.model_dump(mode="json") for m in other.messages])
    assert again.id == first.id
    tokenizer = data.tokenizer()
    examples, report = examples_from_trajectories([first, other, again], tokenizer, "opd")
    assert [e.trajectory_id for e in examples] == [first.id, other.id]
    assert examples[0].input_ids == tokenize_trajectory(first, tokenizer).input_ids
    assert report.dropped == {"duplicate_id": 1}
    assert report.dropped_ids["duplicate_id"] == [first.id]
    assert (report.trajectories, report.examples) == (3, 2)


# ---- 7. SFT trains on the verifier's passes ----------------------------------------------------
def test_sft_keeps_only_passed_trajectories_by_default() -> None:
    trajectories = data.graded({"a": [1.0, 0.995, 0.5, None]})
    examples, report = examples_from_trajectories(trajectories, data.tokenizer(), "sft")
    assert [e.trajectory_id for e in examples] == [t.id for t in trajectories[:2]]
    assert report.dropped == {"below_sft_min_reward": 1, "invalid_reward": 1}
    assert report.dropped_ids["below_sft_min_reward"] == [trajectories[2].id]
    # The verifier's own verdict decides where it is recorded (a package whose
    # pass_threshold is 1.0 fails 0.995).
    strict = changed(
        trajectories[1],
        verification={**trajectories[1].model_dump(mode="json")["verification"], "passed": False},
    )
    assert examples_from_trajectories([strict], data.tokenizer(), "sft")[0] == []
    lenient = changed(
        trajectories[2],
        verification={**trajectories[2].model_dump(mode="json")["verification"], "passed": True},
    )
    assert len(examples_from_trajectories([lenient], data.tokenizer(), "sft")[0]) == 1


def test_sft_min_reward_a_number_or_none() -> None:
    trajectories = data.graded({"a": [1.0, 0.995, 0.5, 0.2, None]})
    half = ObjectiveConfig(sft_min_reward=0.5)
    examples, report = examples_from_trajectories(trajectories, data.tokenizer(), "sft", half)
    assert len(examples) == 3
    assert report.dropped == {"below_sft_min_reward": 1, "invalid_reward": 1}
    everything = ObjectiveConfig.model_validate({"sft_min_reward": None})
    examples, report = examples_from_trajectories(trajectories, data.tokenizer(), "sft", everything)
    assert len(examples) == 5 and report.dropped == {}
    with pytest.raises(ValidationError, match="outside the reward range"):
        ObjectiveConfig(sft_min_reward=1.5)
    assert ObjectiveConfig.model_validate({"sft_min_reward": "passed"}).sft_min_reward == "passed"
    # OPD (the student's own rollouts) and GRPO ignore it.
    opd, _ = examples_from_trajectories(trajectories, data.tokenizer(), "opd")
    assert len(opd) == 5


def test_the_fallback_pass_threshold_is_the_rollouts_own() -> None:
    from coworkgym.rollout.verify import DEFAULT_PASS_THRESHOLD as ROLLOUT_THRESHOLD

    assert DEFAULT_PASS_THRESHOLD == ROLLOUT_THRESHOLD


# ---- 8. GRPO without a usable group -----------------------------------------------------------
def test_no_usable_group_reason_counts_the_groups_and_says_how_to_roll_out() -> None:
    trajectories = data.graded({"flat": [0.5, 0.5], "lonely": [1.0], "also": [0.0, None]})
    examples, report = examples_from_trajectories(trajectories, data.tokenizer(), "grpo")
    assert examples == []
    reason = no_usable_group_reason(report)
    assert reason is not None and reason == report.no_usable_group_reason()
    assert "no GRPO group with reward spread: 2 singleton group(s), 1 zero-variance" in reason
    assert "--samples 4 --harness tool-calling" in reason and "oracle + nop" in reason


def test_oracle_and_nop_rollouts_of_a_package_are_named_as_different_groups() -> None:
    solved, failed = data.graded({"pkg": [1.0, 0.0]})
    rollouts = [under(solved, "oracle"), under(failed, "nop")]
    examples, report = examples_from_trajectories(rollouts, data.tokenizer(), "grpo")
    assert examples == [] and report.groups_singleton == 2
    assert report.packages_in_several_groups == 1 and report.group_harnesses == ["nop", "oracle"]
    reason = no_usable_group_reason(report) or ""
    assert "1 package(s) were rolled out under several harnesses or models (nop, oracle)" in reason


def test_no_usable_group_reason_is_none_when_a_group_is_kept_or_not_grpo() -> None:
    trajectories = data.graded({"a": [1.0, 0.0]})
    _, kept = examples_from_trajectories(trajectories, data.tokenizer(), "grpo")
    assert no_usable_group_reason(kept) is None
    _, sft = examples_from_trajectories(trajectories, data.tokenizer(), "sft")
    assert no_usable_group_reason(sft) is None
    invalid = data.graded({"a": [None, None]})
    _, none = examples_from_trajectories(invalid, data.tokenizer(), "grpo")
    assert "none of the 2 trajectories reached grouping (dropped: invalid_reward 2)" in (
        no_usable_group_reason(none) or ""
    )
