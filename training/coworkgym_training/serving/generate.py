"""One chat completion from a Hugging Face checkpoint: the prompt rendered with the model's
chat template, tokens sampled one at a time with the KV cache, and for each sampled token
its log-probability under the distribution it was drawn from.

That distribution is the model's softmax at the request's temperature, before top-p
truncation (as vLLM's processed log-probs): the quantity GRPO's policy ratio divides by
when the objective's temperature is the sampling temperature.

Tool calls are read from the text in the Hermes form (``<tool_call>{"name": ...,
"arguments": {...}}</tool_call>``), the format ``chat_format`` renders them in when the
checkpoint's template has none of its own. Unlike vLLM's ``hermes`` parser, which leaves a
block that does not parse in the content (so the agent's turn would end there), a malformed
block — bad JSON, no name, not closed — comes back as a tool call whose arguments are the
raw text: the harness answers it with an error, counts it, and the policy goes on.

Requests that arrive together are generated together: a scheduler thread takes what is
queued (up to ``max_batch``), left-pads the prompts and samples every row in one forward
pass per token, each row with its own temperature, top-p, seed and ``max_tokens``. A batch
runs until its longest row ends (static batching, not vLLM's continuous batching).
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from ..chat_format import with_tool_format

# A block, closed or (at the end of the text) not; what is inside is judged afterwards.
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')
DEFAULT_MAX_BATCH = 8


@dataclass(frozen=True)
class Completion:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" (an end-of-turn token) or "length"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    malformed_tool_calls: int = 0


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI wire messages as chat templates read them: content never None, tool-call
    arguments as a dict when they parse as a JSON object (templates ``tojson`` them)."""
    out = []
    for message in messages:
        rendered = {**message, "content": _text(message.get("content"))}
        calls = message.get("tool_calls") or []
        if calls:
            rendered["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _arguments(call)}}
                for call in calls
            ]
        out.append(rendered)
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts: the text ones, joined
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _arguments(call: dict[str, Any]) -> Any:
    raw = call.get("function", {}).get("arguments", "")
    if not isinstance(raw, str):
        return raw
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]], int]:
    """The content without its ``<tool_call>`` blocks, the calls (OpenAI form), and how
    many of them were malformed (their arguments are then the block's raw text, and the
    name whatever the block names, possibly empty)."""
    calls: list[dict[str, Any]] = []
    malformed = 0

    def take(match: re.Match[str]) -> str:
        nonlocal malformed
        raw = match.group(1).strip()
        closed = match.group(0).endswith("</tool_call>")
        try:
            parsed = json.loads(raw) if closed else None
        except json.JSONDecodeError:
            parsed = None
        name = parsed.get("name") if isinstance(parsed, dict) else None
        arguments = parsed.get("arguments", {}) if isinstance(parsed, dict) else None
        if isinstance(name, str) and name and isinstance(arguments, dict | str):
            wire = arguments if isinstance(arguments, str) else json.dumps(arguments)
        else:
            malformed += 1
            found = _NAME.search(raw)
            name, wire = (found.group(1) if found else ""), raw
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": wire},
            }
        )
        return ""

    content = _TOOL_CALL.sub(take, text)
    return (content.strip() if calls else content), calls, malformed


@dataclass
class _Request:
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    done: threading.Event = field(default_factory=threading.Event)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str = "length"
    error: BaseException | None = None


class Generator:
    """A checkpoint loaded for sampling, with a scheduler that batches concurrent requests
    (see the module docstring). ``batches`` and ``batched_rows`` count what it ran."""

    def __init__(
        self,
        folder: Path,
        device: str = "cpu",
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        gather_s: float = 0.005,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.folder = folder
        self.device = torch.device(device)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.tokenizer = with_tool_format(tokenizer, source=str(folder))
        model: Any = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        self.model = model.to(self.device).eval()
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self.stop_ids = self._stop_ids()
        self.pad_id = self._pad_id()
        self.max_batch = max(1, max_batch)
        self.gather_s = gather_s
        self.batches = 0
        self.batched_rows = 0
        self.largest_batch = 0
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._scheduler = threading.Thread(target=self._schedule, daemon=True, name="generator")
        self._scheduler.start()

    def _stop_ids(self) -> set[int]:
        ids = set()
        for token in (self.tokenizer.eos_token, "<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
            if token is None:
                continue
            found = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(found, int) and found != self.tokenizer.unk_token_id:
                ids.add(found)
        return ids

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if isinstance(pad, int):
            return pad
        return min(self.stop_ids) if self.stop_ids else 0

    def prompt_ids(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=cast(Any, tools),  # transformers types the list invariantly
            tokenize=False,
            add_generation_prompt=True,
        )
        return list(self.tokenizer.encode(str(text), add_special_tokens=False))

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Completion:
        prompt = self.prompt_ids(messages, tools)
        if self.context_length and len(prompt) >= self.context_length:
            raise PromptTooLong(
                f"the prompt is {len(prompt)} tokens; this model's context is {self.context_length}"
            )
        if self.context_length:  # as vLLM: generation stops at the context's end ("length")
            max_tokens = min(max_tokens, self.context_length - len(prompt))
        request = _Request(prompt, max_tokens, temperature, top_p, seed)
        self._queue.put(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        shown = [i for i in request.ids if i not in self.stop_ids]
        text = str(self.tokenizer.decode(shown, skip_special_tokens=True))
        content, calls, malformed = parse_tool_calls(text)
        return Completion(
            prompt, request.ids, request.logprobs, content, request.finish, calls, malformed
        )

    # ---- the scheduler ----------------------------------------------------------------
    def _schedule(self) -> None:
        while True:
            batch = [self._queue.get()]
            deadline = time.monotonic() + self.gather_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            try:
                with torch.no_grad():
                    self._sample(batch)
            except Exception as exc:  # every waiting request learns of it
                for request in batch:
                    request.error = exc
            finally:
                self.batches += 1
                self.batched_rows += len(batch)
                self.largest_batch = max(self.largest_batch, len(batch))
                for request in batch:
                    request.done.set()

    def _sample(self, batch: list[_Request]) -> None:
        rows = len(batch)
        width = max(len(r.prompt) for r in batch)
        input_ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        for row, request in enumerate(batch):  # left-padded: every row ends at the same place
            input_ids[row, width - len(request.prompt) :] = torch.tensor(request.prompt)
            attention[row, width - len(request.prompt) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        generators = [_seeded(r.seed) for r in batch]
        active = [r.max_tokens > 0 for r in batch]
        cache = None
        inputs, attention = input_ids.to(self.device), attention.to(self.device)
        positions = positions.to(self.device)
        while any(active):
            output = self.model(
                input_ids=inputs,
                attention_mask=attention if rows > 1 else None,
                position_ids=positions,
                cache=cache,
                use_cache=True,
            )
            cache = output.cache
            logits = output.logits[:, -1].float()
            chosen = []
            for row, request in enumerate(batch):
                if not active[row]:
                    chosen.append(self.pad_id)
                    continue
                scaled = torch.log_softmax(logits[row] / max(request.temperature, 1e-6), dim=-1)
                token = _draw(scaled, request.top_p, request.temperature, generators[row])
                request.ids.append(token)
                request.logprobs.append(float(scaled[token]))
                if token in self.stop_ids:
                    request.finish, active[row] = "stop", False
                elif len(request.ids) >= request.max_tokens:
                    request.finish, active[row] = "length", False
                chosen.append(token)
            inputs = torch.tensor([[t] for t in chosen], device=self.device)
            attention = torch.cat([attention, attention.new_ones((rows, 1))], dim=1)
            positions = positions[:, -1:] + 1


class PromptTooLong(ValueError):
    """A prompt that fills the model's context: a bad request (HTTP 400), as vLLM says."""


def _seeded(seed: int | None) -> torch.Generator:
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31, ()).item()))
    return generator


def _draw(
    logprobs: torch.Tensor, top_p: float, temperature: float, generator: torch.Generator
) -> int:
    if temperature <= 0:
        return int(logprobs.argmax())
    probs = logprobs.exp().cpu()
    if top_p < 1.0:
        ordered, order = probs.sort(descending=True)
        outside = ordered.cumsum(0) - ordered > top_p  # keep the smallest set reaching top_p
        ordered[outside] = 0.0
        probs = torch.zeros_like(probs).scatter(0, order, ordered)
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


__all__ = [
    "Completion",
    "Generator",
    "PromptTooLong",
    "parse_tool_calls",
    "template_messages",
]
