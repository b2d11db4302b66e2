"""Tokenization: agent-token masks under three chat-template styles, tool calls included; the
policy's own token ids used as sampled; the drift a naive re-render would cause."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="needs the training extra: make install-training")
pytest.importorskip("transformers", reason="needs the training extra: make install-training")

from transformers import PreTrainedTokenizerFast

from coworkgym.rollout.trajectory import Trajectory
from coworkgym_training.tokenize import (
    TokenizationError,
    TokenizedTrajectory,
    naive_render,
    tokenize_trajectory,
)
from tests.training import builders
from tests.training import trajectories as make

STYLES = sorted(builders.STYLES)


def agent_text(result: TokenizedTrajectory, tokenizer: PreTrainedTokenizerFast) -> list[str]:
    spans = (s for s in result.spans if s.trainable)
    return [decode(tokenizer, result.input_ids[s.start : s.end]) for s in spans]


def context_text(result: TokenizedTrajectory, tokenizer: PreTrainedTokenizerFast) -> str:
    spans = (s for s in result.spans if not s.trainable)
    return "".join(decode(tokenizer, result.input_ids[s.start : s.end]) for s in spans)


def decode(tokenizer: PreTrainedTokenizerFast, ids: list[int]) -> str:
    return str(tokenizer.decode(ids))


def charwise(tokenizer: PreTrainedTokenizerFast, text: str) -> list[int]:
    """`text` spelled one byte-level token per character: a valid sampling the tokenizer
    would never produce by encoding the same text (it merges "Hello" into one token)."""
    return [i for ch in text for i in tokenizer.encode(ch, add_special_tokens=False)]


@pytest.mark.parametrize("style", STYLES)
def test_only_the_policys_messages_are_targets(style: str) -> None:
    tokenizer = builders.tokenizer(style)
    result = tokenize_trajectory(make.two_turns(), tokenizer)
    first, final = agent_text(result, tokenizer)
    eos = builders.STYLES[style]["eos"]
    # The reply, its tool call and the end-of-turn token are the policy's; nothing else is.
    assert first.startswith(make.THINKING) and first.endswith(eos)
    assert "read_file" in first and '"data/sales.csv"' in first
    assert final == make.FINAL + eos
    context = context_text(result, tokenizer)
    for text in (make.SYSTEM, make.REQUEST, "north,10", make.FOLLOW_UP):
        assert text in context or text.replace("\n", "\\n") in context
        assert all(text not in t for t in (first, final))
    assert len(result.input_ids) == len(result.agent_mask) == len(result.behaviour_logprobs)
    assert [s.message for s in result.spans if s.trainable] == list(make.AGENT_INDICES)


@pytest.mark.parametrize("style", STYLES)
def test_the_sequence_is_the_template_rendering_when_history_renders_stably(style: str) -> None:
    """Without reasoning to strip, each template renders history the same whatever follows
    (mistral's moves its system prompt, so the trajectory has none here): the segments
    concatenate to the template's own rendering of the whole conversation."""
    tokenizer = builders.tokenizer(style)
    plain = make.two_turns(m0={"content": ""}, m2={"content": "Hello, I will read the file first."})
    if style == "mistral":
        data = plain.model_dump(mode="json")
        data["messages"] = data["messages"][1:]
        plain = type(plain).model_validate(data)
    ours = tokenize_trajectory(plain, tokenizer).input_ids
    whole = naive_render(plain, tokenizer)
    assert whole[: len(ours)] == ours
    assert decode(tokenizer, whole[len(ours) :]).strip() == ""


def recorded(style: str) -> tuple[PreTrainedTokenizerFast, Trajectory]:
    """The rollout as a server that returns token ids recorded it: the first reply sampled
    character by character, the final one as the tokenizer would encode it."""
    tokenizer = builders.tokenizer(style)
    rendered = tokenize_trajectory(make.two_turns(), tokenizer)
    first_span, final_span = (s for s in rendered.spans if s.trainable)
    eos_id = tokenizer.convert_tokens_to_ids(builders.STYLES[style]["eos"])
    first_ids = rendered.input_ids[first_span.start : first_span.end]
    first_text = decode(tokenizer, first_ids[:-1])
    sampled = [*charwise(tokenizer, first_text), eos_id]
    final_ids = rendered.input_ids[final_span.start : final_span.end]
    trajectory = make.two_turns(
        m2={"tokens": {"completion_ids": sampled, "logprobs": [-0.5] * len(sampled)}},
        m5={"tokens": {"completion_ids": final_ids, "logprobs": [-0.25] * len(final_ids)}},
    )
    return tokenizer, trajectory


@pytest.mark.parametrize("style", STYLES)
def test_recorded_token_ids_are_used_as_sampled(style: str) -> None:
    tokenizer, trajectory = recorded(style)
    result = tokenize_trajectory(trajectory, tokenizer)
    for span in (s for s in result.spans if s.trainable):
        assert span.message is not None
        record = trajectory.messages[span.message].tokens
        assert record is not None and span.origin == "recorded"
        assert result.input_ids[span.start : span.end] == record.completion_ids
        assert result.behaviour_logprobs[span.start : span.end] == record.logprobs
    records = [m.tokens for m in trajectory.agent_messages() if m.tokens is not None]
    assert len(records) == 2
    assert result.agent_tokens == sum(len(r.completion_ids) for r in records)
    pairs = zip(result.behaviour_logprobs, result.agent_mask, strict=True)
    assert all(lp is None for lp, on in pairs if not on)


@pytest.mark.parametrize("style", STYLES)
def test_a_naive_re_render_drifts_from_the_sampled_tokens(style: str) -> None:
    """Decode → encode merges what the policy sampled one character at a time: the naive
    sequence has the same text but other (fewer) tokens, so it trains on tokens the policy
    never produced. Ours holds the sampled ids."""
    tokenizer, trajectory = recorded(style)
    record = trajectory.messages[2].tokens
    assert record is not None
    sampled = record.completion_ids
    ours = tokenize_trajectory(trajectory, tokenizer).input_ids
    naive = naive_render(trajectory, tokenizer)
    assert _contains(ours, sampled)
    assert not _contains(naive, sampled)
    assert len(naive) < len(ours)


def test_a_template_that_drops_earlier_reasoning_would_lose_the_policys_tokens() -> None:
    """The ChatML template here drops the <think> block of assistant turns before the last
    user message, as Qwen3's does. Rendered whole, the first reply loses the reasoning the
    policy generated; ours keeps every generated token as a target."""
    tokenizer = builders.tokenizer("chatml")
    trajectory = make.two_turns()
    naive_text = decode(tokenizer, naive_render(trajectory, tokenizer))
    assert "read the file first\n</think>" not in naive_text
    first, _ = agent_text(tokenize_trajectory(trajectory, tokenizer), tokenizer)
    assert first.startswith(make.THINKING)


def test_recorded_prompt_ids_are_the_context_when_they_extend_the_sequence() -> None:
    tokenizer, trajectory = recorded("chatml")
    built = tokenize_trajectory(trajectory, tokenizer)
    second_prompt = built.input_ids[: next(s for s in built.spans if s.message == 5).start]
    first_prompt = built.input_ids[: built.spans[0].end]
    data = trajectory.model_dump(mode="json")
    data["messages"][2]["tokens"]["prompt_ids"] = first_prompt
    data["messages"][5]["tokens"]["prompt_ids"] = second_prompt
    with_prompts = Trajectory.model_validate(data)
    result = tokenize_trajectory(with_prompts, tokenizer)
    assert result.input_ids == built.input_ids
    assert [s.origin for s in result.spans] == ["prompt_ids", "recorded", "prompt_ids", "recorded"]
    assert result.prompt_divergences == 0

    # A server whose template re-rendered history: its prompt does not extend ours; the
    # template's context is used instead, and the divergence is counted.
    data["messages"][5]["tokens"]["prompt_ids"] = [second_prompt[0] + 1, *second_prompt[1:]]
    diverged = tokenize_trajectory(Trajectory.model_validate(data), tokenizer)
    assert diverged.input_ids == built.input_ids
    assert diverged.prompt_divergences == 1


def test_an_end_of_turn_token_left_out_by_the_server_is_added_as_a_target() -> None:
    tokenizer = builders.tokenizer("llama3")
    content = tokenizer.encode(make.FINAL, add_special_tokens=False)
    trajectory = make.two_turns(m5={"tokens": {"completion_ids": content}})
    result = tokenize_trajectory(trajectory, tokenizer)
    assert result.input_ids[-1] == tokenizer.convert_tokens_to_ids("<|eot_id|>")
    assert result.agent_mask[-1] and result.behaviour_logprobs[-1] is None
    final = [s for s in result.spans if s.message == 5]
    assert [s.origin for s in final] == ["recorded", "template"]
    assert sum(s.end - s.start for s in final) == len(content) + 1


def test_the_mistral_system_prompt_move_falls_back_to_a_stand_in_history() -> None:
    """Mistral's template puts the system prompt before the last user message, so history
    renders differently once the follow-up arrives; the follow-up's context is rendered
    after a stand-in exchange, and the system prompt is not repeated."""
    tokenizer = builders.tokenizer("mistral")
    result = tokenize_trajectory(make.two_turns(), tokenizer)
    context = context_text(result, tokenizer)
    assert context.count(make.SYSTEM) == 1
    assert f"[INST] {make.FOLLOW_UP}[/INST]" in context


def test_a_tokenizer_without_a_chat_template_is_refused_by_name() -> None:
    tokenizer = builders.tokenizer("chatml")
    tokenizer.chat_template = None
    with pytest.raises(TokenizationError, match="chat template"):
        tokenize_trajectory(make.two_turns(), tokenizer)


def test_a_malformed_tool_call_is_rendered_as_the_model_emitted_it() -> None:
    tokenizer = builders.tokenizer("chatml")
    broken = '{"path": "data/sales.csv"'
    trajectory = make.two_turns(
        m2={"tool_calls": [{"id": "call_0", "name": "read_file", "arguments": broken}]}
    )
    first, _ = agent_text(tokenize_trajectory(trajectory, tokenizer), tokenizer)
    assert broken in first


def _contains(sequence: list[int], part: list[int]) -> bool:
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


def test_an_assistant_message_that_is_not_the_policys_is_context() -> None:
    """A reply replayed from elsewhere (here: recorded as the system's) is not trained on."""
    tokenizer = builders.tokenizer("llama3")
    result = tokenize_trajectory(make.two_turns(m2={"source": "system"}), tokenizer)
    assert [s.message for s in result.spans if s.trainable] == [5]
    assert "Hello, I will read the file first." in context_text(result, tokenizer)
    assert agent_text(result, tokenizer) == [make.FINAL + "<|eot_id|>"]
