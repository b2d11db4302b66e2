"""The declared tool-call format: a ChatML template without tools gets one that renders
them (and their calls, read back by the server's parser); templates with their own are left
alone; any other template without tools is refused rather than guessed at."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers", reason="needs the training extra: make install-training")

from coworkgym_training.chat_format import (
    TOOL_CHATML,
    ToolFormatError,
    renders_tools,
    with_tool_format,
)
from coworkgym_training.serving.generate import parse_tool_calls
from tests.training import builders

PLAIN_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def test_a_chatml_template_without_tools_gets_the_declared_format() -> None:
    tokenizer = builders.tokenizer("chatml")
    tokenizer.chat_template = PLAIN_CHATML
    assert not renders_tools(tokenizer.chat_template)
    with_tool_format(tokenizer)
    assert tokenizer.chat_template == TOOL_CHATML
    messages = [
        {"role": "system", "content": "You work on /app."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": {"command": "ls -la"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.csv"},
    ]
    text = str(tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False))
    assert text.startswith("<|im_start|>system\nYou work on /app.\n\n")
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert "<|im_start|>tool\na.csv<|im_end|>" in text
    # the call as rendered is what the server's parser reads back
    reply = text.split("<|im_start|>assistant\n", 1)[1].split("<|im_end|>", 1)[0]
    content, calls, malformed = parse_tool_calls(reply)
    assert (content, malformed) == ("", 0)
    assert calls[0]["function"]["name"] == "shell"
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls -la"}


def test_history_renders_the_same_whatever_follows_it() -> None:
    """Append-only: the trainer's segment-by-segment rendering needs it."""
    tokenizer = with_tool_format(builders.tokenizer("chatml"), source="t")
    tokenizer.chat_template = TOOL_CHATML
    history = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    longer = [*history, {"role": "assistant", "content": "A"}, {"role": "user", "content": "V"}]
    short = str(tokenizer.apply_chat_template(history, tools=TOOLS, tokenize=False))
    full = str(tokenizer.apply_chat_template(longer, tools=TOOLS, tokenize=False))
    assert full.startswith(short)


def test_templates_that_render_tools_are_kept_and_others_refused() -> None:
    own = builders.tokenizer("chatml")  # the test ChatML renders tools itself
    before = own.chat_template
    assert with_tool_format(own).chat_template == before
    llama = builders.tokenizer("llama3")
    llama.chat_template = "{% for m in messages %}{{ m['content'] }}<|eot_id|>{% endfor %}"
    with pytest.raises(ToolFormatError, match="renders no tools and is not ChatML"):
        with_tool_format(llama, source="llama-folder")
