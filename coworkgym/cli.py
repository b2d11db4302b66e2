"""The ``cowork-gym`` command line."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .detector import DetectorReport, IssueDetector
from .logs import configure_logging
from .package.errors import PackageError
from .package.package import EnvironmentPackage
from .sandbox import SandboxUnavailable

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console(stderr=True)
out = Console()


@app.command()
def check(
    packages: Annotated[list[Path], typer.Argument(help="package directories", exists=True)],
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON report")] = False,
    no_harbor_lint: Annotated[bool, typer.Option(help="skip `harbor lint`")] = False,
) -> None:
    """Audit and execute packages (Cowork or plain Harbor); exit 1 if any has defects."""
    detector = IssueDetector(run_harbor_lint=not no_harbor_lint)
    reports = [detector.check_dir(p) for p in packages]
    if as_json:
        out.print_json(json.dumps([r.to_json() for r in reports]))
    else:
        for path, report in zip(packages, reports, strict=True):
            _print_report(path, report)
    raise typer.Exit(0 if all(r.passed for r in reports) else 1)


def _print_report(path: Path, report: DetectorReport) -> None:
    verdict = "[green]PASS[/]" if report.passed else "[red]FAIL[/]"
    reward = report.stats.reference_reward
    out.print(
        f"{verdict} {path}  reference reward={reward}  verifier runs={report.stats.verifier_runs}"
    )
    if not report.defects:
        return
    table = Table(show_lines=False)
    for column in ("code", "owner", "severity", "message"):
        table.add_column(column)
    for d in report.defects:
        table.add_row(d.code, d.owner, d.severity, d.message)
    out.print(table)


@app.command()
def verify(
    package: Annotated[Path, typer.Argument(exists=True, file_okay=False)],
    workspace: Annotated[Path, typer.Option(exists=True, file_okay=False)],
    trajectory: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Score a workspace with a package's verifier and print each component."""
    from .runtime import LocalRuntime
    from .runtime.workspace import copy_tree, layout

    pkg = EnvironmentPackage.load(package)
    with tempfile.TemporaryDirectory(prefix="cwg-verify-cli-") as tmp:
        scratch = copy_tree(workspace, Path(tmp) / "ws")
        data = json.loads(trajectory.read_text()) if trajectory else None
        outcome = LocalRuntime().run_verifier(pkg, scratch, layout(pkg).workdir, trajectory=data)
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "valid": outcome.valid,
                    "rewards": outcome.rewards,
                    "details": outcome.details,
                    "error": outcome.error,
                }
            )
        )
        raise typer.Exit(0 if outcome.valid else 2)
    if not outcome.valid:
        out.print(f"[red]INVALID[/] {outcome.error}")
        raise typer.Exit(2)
    table = Table(title=f"{pkg.name}: reward {outcome.reward}")
    for column in ("component", "kind", "weight", "score", "status", "evidence"):
        table.add_column(column)
    for c in outcome.details.get("components", []):
        table.add_row(
            c["id"], c["type"], str(c["weight"]), f"{c['score']:.2f}", c["status"], c["evidence"]
        )
    for c in outcome.details.get("red_lines", []):
        table.add_row(c["id"], "red line", "-", f"{c['score']:.2f}", c["status"], c["evidence"])
    out.print(table)


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    configure_logging()
    try:
        app()
    except SandboxUnavailable as exc:
        console.print(f"[red]sandbox unavailable:[/] {exc}")
        sys.exit(3)
    except PackageError as exc:
        console.print(f"[red]invalid input:[/]\n{exc}")
        sys.exit(2)
