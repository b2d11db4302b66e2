"""One chat completion from a Hugging Face checkpoint: the prompt rendered with the model's
chat template, tokens sampled one at a time with the KV cache, and for each sampled token
its log-probability under the distribution it was drawn from.

That distribution is the model's softmax at the request's temperature, before top-p
truncation (as vLLM's processed log-probs): the quantity GRPO's policy ratio divides by
when the objective's temperature is the sampling temperature.

Tool calls are read from the text in the Hermes/Qwen form (``<tool_call>{"name": ...,
"arguments": {...}}</tool_call>``), as vLLM's ``hermes`` parser does; a block that does
not parse stays in the content.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class Completion:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" (an end-of-turn token) or "length"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


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


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The content without its parsed ``<tool_call>`` blocks, and the calls (OpenAI form)."""
    calls: list[dict[str, Any]] = []

    def take(match: re.Match[str]) -> str:
        try:
            parsed = json.loads(match.group(1))
        except json.JSONDecodeError:
            return match.group(0)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return match.group(0)
        arguments = parsed.get("arguments", {})
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": parsed["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
        return ""

    content = _TOOL_CALL.sub(take, text)
    return (content.strip() if calls else content), calls


class Generator:
    """A checkpoint loaded for sampling. Requests run one at a time (a lock): this is a
    test and small-scale server, not a batching engine."""

    def __init__(self, folder: Path, device: str = "cpu") -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.folder = folder
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        self.model = model.to(self.device).eval()
        self.stop_ids = self._stop_ids()
        self._lock = threading.Lock()

    def _stop_ids(self) -> set[int]:
        ids = set()
        for token in (self.tokenizer.eos_token, "<|im_end|>", "<|eot_id|>", "<|endoftext|>"):
            if token is None:
                continue
            found = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(found, int) and found != self.tokenizer.unk_token_id:
                ids.add(found)
        return ids

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

    @torch.no_grad()
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
        with self._lock:
            ids, logprobs, finish = self._sample(prompt, max_tokens, temperature, top_p, seed)
        shown = [i for i in ids if i not in self.stop_ids]
        text = str(self.tokenizer.decode(shown, skip_special_tokens=True))
        content, calls = parse_tool_calls(text)
        return Completion(prompt, ids, logprobs, content, finish, calls)

    def _sample(
        self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, seed: int | None
    ) -> tuple[list[int], list[float], str]:
        generator = torch.Generator(device="cpu")
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31, ()).item()))
        inputs = torch.tensor([prompt], device=self.device)
        cache = None
        ids: list[int] = []
        logprobs: list[float] = []
        for _ in range(max_tokens):
            output = self.model(input_ids=inputs, cache=cache, use_cache=True)
            cache = output.cache
            logits = output.logits[0, -1].float()
            scaled = torch.log_softmax(logits / max(temperature, 1e-6), dim=-1)
            token = _draw(scaled, top_p, temperature, generator)
            ids.append(token)
            logprobs.append(float(scaled[token]))
            if token in self.stop_ids:
                return ids, logprobs, "stop"
            inputs = torch.tensor([[token]], device=self.device)
        return ids, logprobs, "length"


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


__all__ = ["Completion", "Generator", "parse_tool_calls", "template_messages"]
