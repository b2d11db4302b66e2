"""Tokenizers and models for the training tests, built here from nothing (no download).

Each tokenizer is a byte-level BPE trained on a small local corpus with the ``tokenizers``
library, wrapped in ``PreTrainedTokenizerFast`` with a chat template written below in one
of three families' styles:

- ``chatml``: Qwen-style ``<|im_start|>role ... <|im_end|>``, tool calls as
  ``<tool_call>{json}</tool_call>``, tool results inside a user turn, and, as Qwen3 does,
  the ``<think>`` reasoning of assistant turns before the last user message dropped;
- ``llama3``: ``<|start_header_id|>role<|end_header_id|>`` headers closed by
  ``<|eot_id|>``, tool calls as a JSON object, results in the ``ipython`` role;
- ``mistral``: ``[INST] ... [/INST]``, ``[TOOL_CALLS][...]``, ``[TOOL_RESULTS]``, turns closed
  by ``</s>``, and the system prompt put before the *last* user message (as Mistral's
  templates do), so history renders differently once a later user turn follows.

Models are tiny Llama configurations with random weights (2 layers, hidden size 64).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHATML = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n{% endif %}"
    "Tools: {{ tools | tojson }}<|im_end|>\n"
    "{% elif messages[0].role == 'system' %}"
    "<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% set ns = namespace(last_user=-1) %}"
    "{% for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}"
    "{% endif %}{% endfor %}"
    "{% for m in messages %}"
    "{% if m.role == 'user' %}<|im_start|>user\n{{ m.content }}<|im_end|>\n"
    "{% elif m.role == 'system' and not loop.first %}"
    "<|im_start|>system\n{{ m.content }}<|im_end|>\n"
    "{% elif m.role == 'assistant' %}"
    "{% set content = m.content %}"
    "{% if loop.index0 < ns.last_user and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1].lstrip('\n') %}{% endif %}"
    "<|im_start|>assistant\n{{ content }}"
    "{% for call in m.tool_calls or [] %}"
    "{% if content or not loop.first %}\n{% endif %}"
    '<tool_call>\n{"name": "{{ call.function.name }}", "arguments": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}}\n</tool_call>"
    "{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}"
    "<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

LLAMA3 = (
    "{{- bos_token }}"
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>"
    "{% elif m.role == 'assistant' and m.tool_calls %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{{ m.content }}"
    "{% for call in m.tool_calls %}"
    '{"name": "{{ call.function.name }}", "parameters": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}}"
    "{% endfor %}<|eot_id|>"
    "{% else %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{% endif %}"
)

MISTRAL = (
    "{% set ns = namespace(system='', last_user=-1) %}"
    "{% for m in messages %}{% if m.role == 'system' %}{% set ns.system = m.content %}"
    "{% elif m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}"
    "{% endfor %}"
    "{{- bos_token }}"
    "{% for m in messages %}"
    "{% if m.role == 'user' %}[INST] "
    "{% if loop.index0 == ns.last_user and ns.system %}{{ ns.system }}\n\n{% endif %}"
    "{{ m.content }}[/INST]"
    "{% elif m.role == 'assistant' and m.tool_calls %}{{ m.content }}[TOOL_CALLS]["
    "{% for call in m.tool_calls %}"
    '{"name": "{{ call.function.name }}", "arguments": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}"
    ', "id": "{{ call.id }}"}{% if not loop.last %}, {% endif %}'
    "{% endfor %}]{{ eos_token }}"
    "{% elif m.role == 'assistant' %}{{ m.content }}{{ eos_token }}"
    "{% elif m.role == 'tool' %}"
    '[TOOL_RESULTS]{"content": {{ m.content | tojson }}, "call_id": "{{ m.tool_call_id }}"}'
    "[/TOOL_RESULTS]"
    "{% endif %}{% endfor %}"
)

STYLES: dict[str, dict[str, Any]] = {
    "chatml": {"template": CHATML, "eos": "<|im_end|>", "bos": None},
    "llama3": {"template": LLAMA3, "eos": "<|eot_id|>", "bos": "<|begin_of_text|>"},
    "mistral": {"template": MISTRAL, "eos": "</s>", "bos": "<s>"},
}

SPECIAL_TOKENS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[TOOL_CALLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "<pad>",
]

CORPUS = [
    "Hello Hello Hello, I will read the file first.",
    "Summarise data/sales.csv into out/report.xlsx.",
    '{"path": "data/sales.csv"} {"code": "print(1)"} {"name": "read_file", "arguments": {}}',
    "<tool_call> </tool_call> <tool_response> </tool_response> <think> </think>",
    "region,sales north,10 written system user assistant ipython tool",
    "I saved the quarterly report to /app/out/report.xlsx. You are a careful analyst.",
    "The totals look wrong; the user replaced the table. Let me check the sheet again.",
]


@cache
def _bpe() -> str:
    """The trained BPE, as JSON (trained once per test session)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer=trainer)
    return tokenizer.to_str()


def tokenizer(style: str) -> PreTrainedTokenizerFast:
    spec = STYLES[style]
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=Tokenizer.from_str(_bpe()),
        chat_template=spec["template"],
        eos_token=spec["eos"],
        bos_token=spec["bos"],
        pad_token="<pad>",
    )


def tiny_model(vocab_size: int, seed: int = 0) -> LlamaForCausalLM:
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,  # room for a rendered tool list (the server refuses longer)
    )
    model = LlamaForCausalLM(config)
    model.eval()  # type: ignore[no-untyped-call]
    return model


def saved_student(folder: Path, style: str = "chatml", seed: int = 0) -> Path:
    """A tiny random model and its tokenizer saved as a Hugging Face folder."""
    chat = tokenizer(style)
    tiny_model(len(chat), seed).save_pretrained(folder)
    chat.save_pretrained(folder)
    return folder
