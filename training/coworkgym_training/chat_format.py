"""The tool-call format a checkpoint is served and trained with.

A chat template that renders ``tools`` (Qwen's, Llama 3's, Mistral's) is used as it is. One
that ignores them — SmolLM2's plain ChatML, for one — would have the policy call tools it
was never shown, and would drop the calls from the history it is trained on. Such a ChatML
template is replaced by ``TOOL_CHATML``, the format this project declares for it:

- the tools are listed, one JSON schema per line, in the system message, between
  ``<tools>`` and ``</tools>``, after the system text, with how to call them;
- an assistant's call is written as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
  (the Hermes form, which ``serving.generate.parse_tool_calls`` reads back, as vLLM's
  ``hermes`` parser does);
- a tool's result is a ``tool`` turn of its own.

The server and the trainer both load the tokenizer through ``with_tool_format``, so the
prompt a policy was sampled from and the one it is trained on are rendered alike.
``pretrained.prepare`` writes the template into the model folder, so other readers of the
folder (``select``, a notebook) see it too.
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)

TOOL_FORMAT = "chatml-hermes"

# The system text SmolLM2's own template puts first when a conversation has none, kept so a
# conversation without tools renders exactly as the model was trained to see it.
_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TOOL_CHATML = (
    "{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' "
    "else '" + _DEFAULT_SYSTEM + "' -%}"
    "{{- '<|im_start|>system\\n' + system -}}"
    "{%- if tools -%}"
    "{{- '\\n\\nYou can call these tools. Their JSON schemas, one per line:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\nTo call a tool, write a JSON object with its name and arguments "
    "between <tool_call> and </tool_call>, for example:\\n<tool_call>\\n"
    '{"name": "tool_name", "arguments": {"argument": "value"}}'
    "\\n</tool_call>' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for message in messages -%}"
    "{%- if not (loop.first and message['role'] == 'system') -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] -%}{{- message['content'] -}}{%- endif -%}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{%- set function = call['function'] if call['function'] is defined else call -%}"
    "{{- '<tool_call>\\n{\"name\": ' + (function['name'] | tojson) + ', \"arguments\": ' -}}"
    "{%- if function['arguments'] is string -%}{{- function['arguments'] -}}"
    "{%- else -%}{{- function['arguments'] | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


class ToolFormatError(ValueError):
    """A chat template that renders no tools and has no declared replacement."""


def renders_tools(template: str | None) -> bool:
    """Whether a chat template uses the ``tools`` it is given."""
    return bool(template) and "tools" in str(template)


def with_tool_format(tokenizer: Any, *, source: str = "") -> Any:
    """``tokenizer`` with a chat template that renders tools: its own when it does, else
    ``TOOL_CHATML`` for a ChatML template (changed in place, and logged). A template of
    another family without tools is refused: there is no declared format for it."""
    template = getattr(tokenizer, "chat_template", None)
    if renders_tools(template):
        return tokenizer
    if template and "<|im_start|>" not in str(template):
        raise ToolFormatError(
            f"{source or 'the tokenizer'}: its chat template renders no tools and is not "
            "ChatML; give the model folder a chat template that renders `tools`"
        )
    tokenizer.chat_template = TOOL_CHATML
    log.info(
        "chat template renders no tools; using the declared format",
        format=TOOL_FORMAT,
        model=source or None,
    )
    return tokenizer


__all__ = ["TOOL_CHATML", "TOOL_FORMAT", "ToolFormatError", "renders_tools", "with_tool_format"]
