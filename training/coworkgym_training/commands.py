"""The training package's ``cowork-gym`` commands, registered through the
``cowork_gym.commands`` entry point (the core CLI calls ``register(app)`` at start and
never imports this package itself).

This module imports only typer and rich, so every ``cowork-gym`` command starts as fast as
before; torch and transformers load when a training command runs, and their absence (the
``training`` extra not installed) is reported with how to install it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from .select import LengthBy, Method

INSTALL_HINT = (
    "needs the training extra (torch, transformers): "
    "pip install 'cowork-gym[training]', or `make install-training` in a checkout"
)

console = Console(stderr=True)
out = Console()


def _require_training_extra(command: str) -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        console.print(f"[red]cowork-gym {command} {INSTALL_HINT}[/] ({escape(str(exc))})")
        raise typer.Exit(2) from None


def select_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(help="trajectory JSONL files, or folders of them", exists=True),
    ],
    model: Annotated[
        Path,
        typer.Option(help="the student: a local Hugging Face model folder with its tokenizer"),
    ],
    out_path: Annotated[Path, typer.Option("--out", help="where the kept trajectories go")],
    method: Annotated[str, typer.Option(help="nll (keep the central fraction) or rsr")] = "nll",
    keep: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="the fraction each length bin keeps")
    ] = 0.7,
    bins: Annotated[int, typer.Option(min=1, help="equal-frequency length bins")] = 5,
    length_by: Annotated[
        str, typer.Option(help="what length bins by: tokens (rendered) or steps (tool calls)")
    ] = "tokens",
    rank_clip: Annotated[int, typer.Option(min=1, help="RSR's rank clip r_max")] = 100,
    report: Annotated[
        Path | None,
        typer.Option(help="a folder for selection.json and selection.png"),
    ] = None,
    device: Annotated[
        str | None, typer.Option(help="torch device (default: cuda when available, else cpu)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Keep the trajectories that suit a student: NLL or RSR under it, inside
    equal-frequency length bins, a fixed fraction of each bin (docs/training.md)."""
    if method not in ("nll", "rsr"):
        raise typer.BadParameter(f"{method!r}: choose nll or rsr", param_hint="--method")
    if length_by not in ("tokens", "steps"):
        raise typer.BadParameter(f"{length_by!r}: choose tokens or steps", param_hint="--length-by")
    if keep <= 0:
        raise typer.BadParameter("keep a fraction above 0", param_hint="--keep")
    _require_training_extra("select")
    from coworkgym.rollout.reading import TrajectoryReadError

    from .selection_report import selection_table, write_report
    from .selection_run import SelectionError, load_student, select_files

    options: dict[str, Any] = {
        "method": _method(method),
        "keep": keep,
        "bins": bins,
        "length_by": _length_by(length_by),
        "rank_clip": rank_clip,
    }
    try:
        student = load_student(model, device)
        result = select_files(inputs, out_path, student, **options)
    except (SelectionError, TrajectoryReadError, OSError, ValueError) as exc:
        console.print(f"[red]cannot select:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if report is not None:
        json_path, png_path = write_report(result, report)
        console.print(f"report: {json_path}, {png_path}")
    if as_json:
        out.print_json(result.model_dump_json())
    else:
        out.print(selection_table(result))
    console.print(f"{result.kept} kept of {result.entered} → {out_path}")


def _method(value: str) -> Method:
    return "rsr" if value == "rsr" else "nll"


def _length_by(value: str) -> LengthBy:
    return "steps" if value == "steps" else "tokens"


def register(app: typer.Typer) -> None:
    app.command("select")(select_command)


__all__ = ["INSTALL_HINT", "register", "select_command"]
