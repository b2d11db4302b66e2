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
    by_group: Annotated[
        bool,
        typer.Option(
            "--by-group/--by-trajectory",
            help="keep or drop whole GRPO groups (one package under one harness and model; "
            "a group scores its members' mean; singleton groups dropped): use it when "
            "selecting data for GRPO",
        ),
    ] = False,
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
        "by_group": by_group,
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


def train_command(
    objective: Annotated[str | None, typer.Option(help="sft, grpo or opd")] = None,
    model: Annotated[
        Path | None, typer.Option(help="the starting weights: a local Hugging Face folder")
    ] = None,
    data: Annotated[
        list[Path] | None,
        typer.Option(help="trajectory JSONL files or folders (repeat for several)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="the run's folder: config, metrics, status")
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="a TrainConfig as JSON (OUT/config.json of a run is one); flags override it",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Ray Train workers")] = None,
    max_steps: Annotated[int | None, typer.Option(help="optimizer steps in all")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="sequences per step, all workers together")
    ] = None,
    micro_batch_size: Annotated[
        int | None,
        typer.Option(
            help="sequences per forward/backward on each worker; gradients accumulate over "
            "a step's micro-batches (default: a worker's whole share at once)"
        ),
    ] = None,
    learning_rate: Annotated[float | None, typer.Option()] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option(help="a folder or s3://bucket/prefix (default OUT/checkpoints)"),
    ] = None,
    checkpoint_every: Annotated[int | None, typer.Option(help="steps between checkpoints")] = None,
    select: Annotated[
        str | None, typer.Option(help="select first under the model: nll or rsr")
    ] = None,
    keep: Annotated[float | None, typer.Option(help="with --select: fraction kept")] = None,
    teacher: Annotated[Path | None, typer.Option(help="OPD's teacher model folder")] = None,
    reference: Annotated[Path | None, typer.Option(help="GRPO's KL reference folder")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda")] = None,
    strategy: Annotated[str | None, typer.Option(help="replicated or fsdp (GPUs)")] = None,
    max_failures: Annotated[
        int | None, typer.Option(help="worker-group restarts before the run fails")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="serve Prometheus metrics on 127.0.0.1:PORT")
    ] = None,
    objective_options: Annotated[
        str | None,
        typer.Option(help='the objective\'s settings as JSON, e.g. \'{"grpo": {"kl_beta": 0.1}}\''),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(help="on-policy rounds: serve → roll out --packages → train, N times"),
    ] = None,
    packages: Annotated[
        list[str] | None, typer.Option(help="with --rounds: environment packages to roll out")
    ] = None,
    samples: Annotated[int | None, typer.Option(help="with --rounds: rollouts per package")] = None,
    rollout_options: Annotated[
        str | None,
        typer.Option(
            help='with --rounds: rollout settings as JSON, e.g. \'{"max_steps": 8, '
            '"max_tokens": 256, "temperature": 1.0}\''
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the final status as JSON")] = False,
) -> None:
    """Train a model on trajectories with Ray Train (SFT, GRPO or OPD), on this machine or
    inside a Ray cluster; checkpoints resume a stopped run (docs/training.md)."""
    _require_training_extra("train")
    import json

    from pydantic import ValidationError

    from .trainer.options import train_fields

    flags = {
        "objective": objective,
        "model": model,
        "data": data or None,
        "out": out,
        "workers": workers,
        "max_steps": max_steps,
        "checkpoint": checkpoint,
        "checkpoint_every": checkpoint_every,
        "teacher_model": teacher,
        "reference_model": reference,
        "device": device,
        "strategy": strategy,
        "max_failures": max_failures,
        "metrics_port": metrics_port,
    }
    try:
        base = json.loads(config_file.read_text()) if config_file is not None else {}
        options = json.loads(objective_options) if objective_options else None
        rollout = json.loads(rollout_options) if rollout_options else {}
    except ValueError as exc:
        console.print(f"[red]cannot train:[/] not JSON: {escape(str(exc))}")
        raise typer.Exit(2) from None
    fields = train_fields(
        base,
        flags,
        hyperparameters={
            "batch_size": batch_size,
            "micro_batch_size": micro_batch_size,
            "learning_rate": learning_rate,
        },
        selection={"method": select, "keep": keep} if select else None,
        objective_options=options,
    )
    try:
        if rounds is not None:
            if samples is not None:
                rollout["samples"] = samples
            status = _rounds(fields, rounds, packages or [], rollout)
        else:
            status = _train(fields)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "config"
            console.print(f"[red]cannot train:[/] {where}: {escape(error['msg'])}")
        raise typer.Exit(2) from None
    except (OSError, ValueError) as exc:
        console.print(f"[red]cannot train:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if as_json:
        out_console = Console()
        out_console.print_json(status.model_dump_json())
    colour = "green" if status.state == "succeeded" else "red"
    why = f" ({status.reason})" if status.reason else ""
    console.print(
        f"[{colour}]{status.state}{why}[/]: step {status.step} of {status.max_steps}, "
        f"checkpoint {status.checkpoint or 'none'}. {escape(status.message)}"
    )
    raise typer.Exit(0 if status.state == "succeeded" else 1)


def _train(fields: dict[str, Any]) -> Any:
    from .trainer.config import TrainConfig
    from .trainer.run import train

    return train(TrainConfig.model_validate(fields)).status


def _rounds(
    fields: dict[str, Any], rounds: int, packages: list[str], rollout: dict[str, Any]
) -> Any:
    from .trainer.rounds import RoundsConfig, run_rounds

    config = RoundsConfig.model_validate(
        {"train": fields, "rounds": rounds, "packages": packages, "rollout": rollout}
    )
    return run_rounds(config, progress=console).status


def serve_checkpoint_command(
    location: Annotated[
        str,
        typer.Argument(
            help="the weights: a model folder, an s3:// model or checkpoint prefix, or "
            "pretrained:NAME (see `cowork-gym pretrained list`)"
        ),
    ],
    model_name: Annotated[
        str, typer.Option("--model-name", help="the name the server answers to")
    ] = "policy",
    host: Annotated[str, typer.Option(help="the address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="the port")] = 8000,
    device: Annotated[str, typer.Option(help="cpu or cuda")] = "cpu",
    max_batch: Annotated[
        int, typer.Option(min=1, help="concurrent requests generated together, at most")
    ] = 8,
    into: Annotated[Path, typer.Option(help="where s3:// weights are fetched to")] = Path(
        "/tmp/served"
    ),
) -> None:
    """Serve a checkpoint as an OpenAI-compatible endpoint (/v1/models, /v1/chat/completions
    with token ids and log-probs) until SIGTERM: an on-policy TrainingRun round's server."""
    _require_training_extra("serve-checkpoint")
    from .serving.checkpoint import serve_checkpoint

    try:
        serve_checkpoint(
            location,
            model_name=model_name,
            host=host,
            port=port,
            device=device,
            max_batch=max_batch,
            into=into,
            say=lambda text: out.print(escape(text), soft_wrap=True),
        )
    except FileNotFoundError as exc:  # unwrapped: the pod's termination message is this line
        console.print(f"[red]cowork-gym serve-checkpoint: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("select")(select_command)
    app.command("train")(train_command)
    app.command("serve-checkpoint")(serve_checkpoint_command)
    from .pretrained_commands import app as pretrained_app

    app.add_typer(pretrained_app, name="pretrained")


__all__ = [
    "INSTALL_HINT",
    "register",
    "select_command",
    "serve_checkpoint_command",
    "train_command",
]
