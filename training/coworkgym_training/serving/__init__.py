"""A small OpenAI-compatible chat-completions server for a checkpoint (transformers, one
process, 127.0.0.1): what the on-policy loop and the CPU tests roll out against. GPU
clusters serve with vLLM instead; both return the fields a trajectory records (the
completion's token ids, their log-probabilities and the prompt's token ids)."""

from .generate import Completion, Generator, parse_tool_calls
from .server import ChatServer

__all__ = ["ChatServer", "Completion", "Generator", "parse_tool_calls"]
