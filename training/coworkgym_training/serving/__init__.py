"""A small OpenAI-compatible chat-completions server for a checkpoint (transformers, one
process): what the on-policy loop (on 127.0.0.1), an on-policy TrainingRun round's server
pod (``cowork-gym serve-checkpoint``, on 0.0.0.0) and the CPU tests roll out against. GPU
clusters serve with vLLM instead; both return the fields a trajectory records (the
completion's token ids, their log-probabilities and the prompt's token ids)."""

from .checkpoint import fetch_weights, serve_checkpoint
from .generate import Completion, Generator, parse_tool_calls
from .server import ChatServer

__all__ = [
    "ChatServer",
    "Completion",
    "Generator",
    "fetch_weights",
    "parse_tool_calls",
    "serve_checkpoint",
]
