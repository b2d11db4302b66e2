"""Serve one checkpoint as an OpenAI-compatible endpoint until told to stop: what an on-policy
TrainingRun round's server pod runs (``cowork-gym serve-checkpoint``).

The weights come from a folder, or from an s3:// prefix (a model folder, or a checkpoint
``checkpoints/round-<r>/step-<n>/``), fetched with the store credentials of the pod's
environment; a checkpoint's optimizer state (``trainer_state.pt``, about twice the weights)
is not fetched: serving never reads it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

NOT_WEIGHTS = ("trainer_state.pt",)  # trainer/checkpoint.py TRAINER_STATE
PRETRAINED_SCHEME = "pretrained:"  # pretrained:smollm2-135m-instruct, prepared in the cache


def fetch_weights(location: str, into: Path, client: Any | None = None) -> Path:
    """``location`` as a local model folder: an s3:// prefix downloaded into ``into``
    (but NOT_WEIGHTS), ``pretrained:NAME`` (the prepared folder, see ``pretrained``), or a
    folder taken as it is. FileNotFoundError when there is none."""
    if location.startswith(PRETRAINED_SCHEME):
        from ..pretrained import prepare

        return prepare(location.removeprefix(PRETRAINED_SCHEME))
    if not location.startswith("s3://"):
        folder = Path(location)
        if not folder.is_dir():
            raise FileNotFoundError(f"{location}: no model folder there")
        return folder
    from coworkgym.release import download_prefix, make_s3_client, split_s3_uri

    client = client or make_s3_client()
    bucket, key = split_s3_uri(location.rstrip("/"))
    if not download_prefix(client, bucket, key, into, skip=NOT_WEIGHTS):
        raise FileNotFoundError(f"{location}: no model files under it")
    return into


def serve_checkpoint(
    location: str,
    *,
    model_name: str,
    host: str = "0.0.0.0",
    port: int = 8000,
    device: str = "cpu",
    max_batch: int = 8,
    into: Path = Path("/tmp/served"),
    stop: threading.Event | None = None,
    say: Any = print,
) -> None:
    """Fetch ``location``, serve it as ``model_name`` on ``host:port`` until ``stop`` is
    set (SIGTERM and SIGINT set it when none is given: a pod's first process gets no
    default handler for them)."""
    from .server import ChatServer

    folder = fetch_weights(location, into)
    if stop is None:
        signals = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: signals.set())
        signal.signal(signal.SIGINT, lambda *_: signals.set())
        stop = signals
    server = ChatServer(
        folder, model_name=model_name, host=host, port=port, device=device, max_batch=max_batch
    )
    with server:
        say(f"serving {location} as {model_name} on http://{host}:{server.port}/v1")
        stop.wait()
    stats = server.stats()
    say(
        f"stopped serving {model_name} after {stats['requests']} request(s): finish reasons "
        f"{stats['finish_reasons']}, {stats['malformed_tool_calls']} malformed tool call(s), "
        f"{stats['batches']} batch(es) of {stats['mean_batch']} on average"
    )


__all__ = ["NOT_WEIGHTS", "fetch_weights", "serve_checkpoint"]
