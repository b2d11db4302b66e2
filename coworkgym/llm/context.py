"""Context management for long agent sessions: keep the conversation under a character budget.

What grows without bound in a tool-using session is tool output (file listings, logs) and
the arguments of file writes the model already made. Both are recoverable — the model can
re-run the tool or re-read the file — so they are what we drop first, oldest first, while
the system prompt, the task, every assistant turn's reasoning and the most recent tool
results stay intact. Arguments stay valid JSON (servers re-parse them for chat templates).
"""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]
ELIDED = "[elided to save context: {n} characters; re-run the tool or re-read the file]"
KEEP_ARGUMENT_CHARS = 200


def size(messages: list[Message]) -> int:
    return sum(_message_size(m) for m in messages)


def _message_size(message: Message) -> int:
    total = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or []:
        total += len(call["function"]["arguments"] or "")
    return total


def compact(messages: list[Message], budget_chars: int, keep_recent: int) -> int:
    """Shrink old tool results, then old tool-call arguments, until the conversation fits.
    Returns the number of characters removed. The newest ``keep_recent`` messages stay."""
    removed = 0
    excess = size(messages) - budget_chars
    if excess <= 0:
        return 0
    old = messages[: max(0, len(messages) - keep_recent)]
    for message in old:  # tool results first: they are the bulk and easy to get back
        if excess - removed <= 0:
            return removed
        if message.get("role") == "tool":
            removed += _elide_content(message)
    for message in old:
        if excess - removed <= 0:
            return removed
        for call in message.get("tool_calls") or []:
            removed += _elide_arguments(call["function"])
    return removed


def _elide_content(message: Message) -> int:
    content = str(message.get("content") or "")
    if len(content) <= KEEP_ARGUMENT_CHARS or content.startswith("[elided"):
        return 0
    replacement = ELIDED.format(n=len(content))
    message["content"] = replacement
    return len(content) - len(replacement)


def _elide_arguments(function: dict[str, Any]) -> int:
    raw = function.get("arguments") or ""
    if len(raw) <= KEEP_ARGUMENT_CHARS:
        return 0
    try:
        args = json.loads(raw)
    except ValueError:
        args = None
    if isinstance(args, dict):
        short = {
            k: ELIDED.format(n=len(v)) if isinstance(v, str) and len(v) > KEEP_ARGUMENT_CHARS else v
            for k, v in args.items()
        }
        replacement = json.dumps(short)
    else:
        replacement = json.dumps({"elided": ELIDED.format(n=len(raw))})
    if len(replacement) >= len(raw):
        return 0
    function["arguments"] = replacement
    return len(raw) - len(replacement)
