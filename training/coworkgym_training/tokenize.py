"""A trajectory rendered into one token sequence with an agent-token mask.

The sequence is built segment by segment, in message order:

- **context** (system, user, tool and workspace messages, and the generation prompt the
  template puts before each assistant turn) is rendered with the policy's chat template
  and masked out;
- **agent** messages (``Message.source == "agent"``) are the training targets. When the
  trajectory recorded the policy's own token ids (``TokenRecord.completion_ids``) they are
  used exactly as sampled; otherwise the message is rendered with the template. A turn
  ends with the template's end-of-turn token as a target, unless the reply was cut off by
  ``max_tokens`` (``finish_reason == "length"``): the policy never ended it, so the token
  the template closes it with is context.

Why not render the whole conversation once and locate the assistant spans in it? Because
that re-tokenizes what the policy generated and re-renders earlier turns, and both drift:
the tokenizer may encode the decoded text differently from how it was sampled (``Hel`` +
``lo`` comes back as ``Hello``), and templates rewrite history (Qwen3-style templates
drop the reasoning of earlier assistant turns). Training on the drifted sequence trains
on tokens the policy never produced. ``naive_render`` keeps that path for comparison.

Context between two agent turns is taken from the server's own ``prompt_ids`` for the
next call when they extend the sequence built so far (exactly what the policy saw), else
from the template: the text the template adds after the history, which is stable when the
template renders history the same way whatever follows it, and is otherwise rendered
after a neutral stand-in history (a placeholder user/assistant exchange) instead.
Context after the last agent turn is dropped: nothing after it is trained on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from transformers import PreTrainedTokenizerBase

from coworkgym.rollout.trajectory import Message, Trajectory

Origin = Literal["template", "prompt_ids", "recorded"]

# A neutral history to render context or agent messages after, when the template renders
# the real history differently depending on what follows it (see _delta).
_STAND_IN_USER = {"role": "user", "content": "."}
_STAND_IN_ASSISTANT = {"role": "assistant", "content": "."}


class TokenizationError(ValueError):
    """A trajectory that cannot be rendered (no chat template, a template that raises)."""


@dataclass(frozen=True)
class Span:
    """One segment of the sequence: ``[start, end)``; ``message`` is the index into the
    trajectory's messages for an agent segment (None for context)."""

    start: int
    end: int
    trainable: bool
    origin: Origin
    message: int | None = None


@dataclass(frozen=True)
class TokenizedTrajectory:
    trajectory_id: str
    input_ids: list[int]
    agent_mask: list[bool]
    # The policy's log-probability of each token as sampled; None where not recorded
    # (context, re-rendered agent text, an end-of-turn token the server left out).
    behaviour_logprobs: list[float | None]
    spans: list[Span] = field(default_factory=list)
    # Calls whose recorded prompt_ids did not extend the sequence built before them (the
    # server's template re-rendered history); their context came from the template.
    prompt_divergences: int = 0

    @property
    def agent_tokens(self) -> int:
        return sum(self.agent_mask)

    def __len__(self) -> int:
        return len(self.input_ids)


def chat_message(message: Message) -> dict[str, Any]:
    """A message as Hugging Face chat templates read it. Tool-call arguments are passed as a
    dict when they parse as a JSON object (templates ``tojson`` them), else as the raw text
    the model emitted (a malformed call stays as it was)."""
    rendered: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        rendered["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        rendered["tool_call_id"] = message.tool_call_id
    return rendered


def _arguments(raw: str) -> dict[str, Any] | str:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


class _Renderer:
    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, tools: list[dict[str, Any]] | None
    ) -> None:
        self.tokenizer = tokenizer
        self.tools = tools

    def text(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        try:
            rendered = self.tokenizer.apply_chat_template(
                messages,
                tools=cast(Any, self.tools),  # transformers types the list invariantly
                tokenize=False,
                add_generation_prompt=generation_prompt,
            )
        except Exception as exc:  # jinja raises its own types, and templates raise_exception
            raise TokenizationError(f"the chat template failed: {exc}") from exc
        if not isinstance(rendered, str):
            raise TokenizationError("the tokenizer has no chat template to render with")
        return rendered

    def encode(self, text: str) -> list[int]:
        # Special tokens come from the template's text (bos_token and all), never added twice.
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def delta(
        self,
        history: list[dict[str, Any]],
        added: list[dict[str, Any]],
        *,
        history_prompt: bool,
        generation_prompt: bool,
        stand_in: list[dict[str, Any]],
    ) -> str:
        """The text the template adds for `added` after `history`. Trailing whitespace of
        the history (the newline after an end-of-turn token) counts as added text, so the
        agent's span ends at its end-of-turn token. When the template renders `history`
        differently once `added` follows it, the delta is taken after `stand_in` instead."""
        for before in (history, stand_in):
            base = self.text(before, generation_prompt=history_prompt) if before else ""
            if not history_prompt:
                base = base.rstrip()
            full = self.text(before + added, generation_prompt=generation_prompt)
            if full.startswith(base):
                return full[len(base) :]
        raise TokenizationError(
            "the chat template renders the history differently once a message follows it, "
            "even after a stand-in history; this template needs recorded prompt_ids"
        )


def tokenize_trajectory(
    trajectory: Trajectory,
    tokenizer: PreTrainedTokenizerBase,
    *,
    tools: list[dict[str, Any]] | None = None,
    use_recorded_tokens: bool = True,
) -> TokenizedTrajectory:
    """Render `trajectory` into input ids and an agent mask (see the module docstring).
    `use_recorded_tokens=False` ignores ``TokenRecord``s and renders every agent message
    with the template (what a record without token ids gets anyway). ``tools`` defaults to
    the ones the trajectory records it offered the policy, so the prompt is the one the
    policy saw."""
    renderer = _Renderer(tokenizer, tools if tools is not None else (trajectory.tools or None))
    messages = [chat_message(m) for m in trajectory.messages]
    agent_indices = [i for i, m in enumerate(trajectory.messages) if m.trainable]
    end_of_turn = _end_of_turn_ids(renderer)

    ids: list[int] = []
    mask: list[bool] = []
    logprobs: list[float | None] = []
    spans: list[Span] = []
    divergences = 0

    def append(
        new: list[int], trainable: bool, origin: Origin, message: int | None = None, lps: Any = None
    ) -> None:
        if not new:
            return
        spans.append(Span(len(ids), len(ids) + len(new), trainable, origin, message))
        ids.extend(new)
        mask.extend([trainable] * len(new))
        logprobs.extend(lps if lps is not None else [None] * len(new))

    previous = 0  # messages[:previous] are in the sequence
    for index in agent_indices:
        record = trajectory.messages[index].tokens if use_recorded_tokens else None
        # Context up to this agent turn, with the generation prompt.
        if record is not None and record.prompt_ids is not None:
            if record.prompt_ids[: len(ids)] == ids:
                append(record.prompt_ids[len(ids) :], False, "prompt_ids")
                record_prompt_used = True
            else:
                divergences += 1
                record_prompt_used = False
        else:
            record_prompt_used = False
        if not record_prompt_used:
            stand_in = [_STAND_IN_USER, _STAND_IN_ASSISTANT] if previous else []
            context = renderer.delta(
                messages[:previous],
                messages[previous:index],
                history_prompt=False,
                generation_prompt=True,
                stand_in=stand_in,
            )
            append(renderer.encode(context), False, "template")

        # The agent's own turn. A reply cut off by max_tokens ("length") has no end-of-turn
        # of the policy's: the template closes it in the next call's prompt, so there it is
        # context (and after the last agent turn nothing), never a target.
        cut_off = trajectory.messages[index].finish_reason == "length"
        closing_context = cut_off and index != agent_indices[-1]
        if record is not None:
            append(record.completion_ids, True, "recorded", index, record.logprobs)
            # A server that stops on the end-of-turn token may leave it out of the ids; the
            # policy did end its turn there, so it is a target (without a logprob).
            if end_of_turn and record.completion_ids[-len(end_of_turn) :] != end_of_turn:
                if not cut_off:
                    append(end_of_turn, True, "template", index)
                elif closing_context:
                    append(end_of_turn, False, "template")
        else:
            text = renderer.delta(
                messages[:index],
                [messages[index]],
                history_prompt=True,
                generation_prompt=False,
                stand_in=[_STAND_IN_USER],
            )
            rendered = renderer.encode(text.rstrip())
            closes = bool(end_of_turn) and rendered[-len(end_of_turn) :] == end_of_turn
            if cut_off and closes:
                append(rendered[: -len(end_of_turn)], True, "template", index)
                if closing_context:
                    append(end_of_turn, False, "template")
            else:
                append(rendered, True, "template", index)
        previous = index + 1

    return TokenizedTrajectory(
        trajectory_id=trajectory.id,
        input_ids=ids,
        agent_mask=mask,
        behaviour_logprobs=logprobs,
        spans=spans,
        prompt_divergences=divergences,
    )


def _end_of_turn_ids(renderer: _Renderer) -> list[int]:
    """The tokens the template closes an assistant turn with (``<|im_end|>``,
    ``<|eot_id|>``, ``</s>``): what follows a placeholder reply, up to trailing whitespace."""
    marker = "\u2063END\u2063"
    exchange = [_STAND_IN_USER, {"role": "assistant", "content": marker}]
    rendered = renderer.text(exchange, generation_prompt=False)
    if marker not in rendered:
        return []
    return renderer.encode(rendered.split(marker, 1)[1].rstrip())


def naive_render(
    trajectory: Trajectory,
    tokenizer: PreTrainedTokenizerBase,
    *,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """The whole conversation rendered by the template at once and re-tokenized: what a
    trainer gets when it ignores the recorded token ids. Kept to measure drift."""
    renderer = _Renderer(tokenizer, tools if tools is not None else (trajectory.tools or None))
    text = renderer.text([chat_message(m) for m in trajectory.messages], generation_prompt=False)
    return renderer.encode(text)


__all__ = [
    "Span",
    "TokenizationError",
    "TokenizedTrajectory",
    "chat_message",
    "naive_render",
    "tokenize_trajectory",
]
