"""The ``cowork-gym`` command line."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .detector import DetectorReport, ImageSettings, IssueDetector
from .detector.task_image import ImageMode as TaskImageMode
from .image.build import BuildNetwork
from .logs import configure_logging
from .package.errors import PackageError
from .package.package import EnvironmentPackage
from .rollout.filters.settings import RULE_ORDER
from .sandbox import SandboxUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .rollout.filters import Verdict

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console(stderr=True)
out = Console()


PACKAGE_HELP = "a package folder, or s3://bucket/prefix/<name> (downloaded first)"


def _package_dir(target: str, scratch: Path) -> Path:
    """The folder of a package argument; an s3:// URI is downloaded below `scratch` first, with
    its files' modes (errors name the URI)."""
    if target.startswith("s3://"):
        from .release import fetch_package

        return fetch_package(target, Path(tempfile.mkdtemp(prefix="package-", dir=scratch)))
    path = Path(target)
    if not path.is_dir():
        raise typer.BadParameter(f"{target} is neither a package folder nor an s3:// URI")
    return path


class ImageMode(StrEnum):
    auto = "auto"
    build = "build"
    emulate = "emulate"


class BuildNetworkOption(StrEnum):
    on = "on"
    task = "task"
    none = "none"


IMAGE_MODES: dict[ImageMode, TaskImageMode] = {
    ImageMode.auto: "auto",
    ImageMode.build: "build",
    ImageMode.emulate: "emulate",
}
BUILD_NETWORKS: dict[BuildNetworkOption, BuildNetwork] = {
    BuildNetworkOption.on: "on",
    BuildNetworkOption.task: "task",
    BuildNetworkOption.none: "none",
}


@app.command()
def check(
    packages: Annotated[list[str], typer.Argument(help=PACKAGE_HELP, show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON report")] = False,
    no_harbor_lint: Annotated[
        bool, typer.Option("--no-harbor-lint", help="skip `harbor lint`")
    ] = False,
    image: Annotated[
        ImageMode,
        typer.Option(
            help="run a Harbor task in its own image (built from environment/Dockerfile with "
            "buildah): auto where this machine can, build always, emulate never",
            envvar="COWORKGYM_CHECK_IMAGE",
        ),
    ] = ImageMode.auto,
    base_image: Annotated[
        list[str] | None,
        typer.Option(
            "--base-image",
            help="map a FROM image to a local one, PATTERN=LOCAL (a glob; LOCAL an image in "
            "the check storage or oci-archive:PATH); repeatable",
            show_default=False,
        ),
    ] = None,
    build_network: Annotated[
        BuildNetworkOption,
        typer.Option(
            help="network of the image build's RUN steps: on (as docker build gives them; "
            "here only the package registries answer), the task's own (its environment's "
            "network_mode), or none"
        ),
    ] = BuildNetworkOption.on,
) -> None:
    """Audit and execute packages (Cowork or plain Harbor); exit 1 if any has defects, 2 if
    one could not be run on this machine (the report says why)."""
    try:
        images = ImageSettings(
            IMAGE_MODES[image], tuple(base_image or ()), BUILD_NETWORKS[build_network]
        )
        images.builder()  # a malformed --base-image is refused before anything runs
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--base-image") from exc
    detector = IssueDetector(run_harbor_lint=not no_harbor_lint, images=images)
    with tempfile.TemporaryDirectory(prefix="cwg-check-") as scratch:
        reports = [detector.check_dir(_package_dir(p, Path(scratch))) for p in packages]
    if as_json:
        out.print_json(json.dumps([r.to_json() for r in reports]))
    else:
        for path, report in zip(packages, reports, strict=True):
            _print_report(path, report)
    verdicts = {r.verdict for r in reports}
    raise typer.Exit(1 if "fail" in verdicts else 2 if "could not run" in verdicts else 0)


VERDICT_LABELS = {
    "pass": "[green]PASS[/]",
    "fail": "[red]FAIL[/]",
    "could not run": "[yellow]COULD NOT RUN[/]",
}


def _print_report(path: str, report: DetectorReport) -> None:
    verdict = VERDICT_LABELS[report.verdict]
    reward = report.stats.reference_reward
    runs = report.stats.verifier_runs
    out.print(f"{verdict} {escape(str(path))}  reference reward={reward}  verifier runs={runs}")
    if not report.defects:
        return
    table = Table(show_lines=False)
    for column in ("code", "owner", "severity", "message"):
        table.add_column(column)
    for d in report.defects:
        table.add_row(*_plain(d.code, d.owner, d.severity, d.message))
    out.print(table)


def _plain(*cells: object) -> list[Text]:
    """Table cells shown as written: messages and evidence quote paths such as
    ``summary.json[/wettest_month]``, which rich would otherwise parse as markup."""
    return [Text(str(cell)) for cell in cells]


@app.command()
def verify(
    package: Annotated[str, typer.Argument(help=PACKAGE_HELP, show_default=False)],
    workspace: Annotated[Path, typer.Option(exists=True, file_okay=False)],
    trajectory: Annotated[Path | None, typer.Option(exists=True, dir_okay=False)] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Score a workspace with a package's verifier and print each component."""
    from .package.limits import workspace_symlink_problems
    from .runtime import LocalRuntime
    from .runtime.workspace import layout

    with tempfile.TemporaryDirectory(prefix="cwg-verify-package-") as download:
        pkg = EnvironmentPackage.load(_package_dir(package, Path(download)))
    if problems := workspace_symlink_problems(pkg.symlinks):
        raise PackageError([f"{package}: {p}" for p in problems])
    data = json.loads(trajectory.read_text()) if trajectory else None
    # run_verifier scores its own normalised copy; the folder given is only read
    outcome = LocalRuntime().run_verifier(pkg, workspace, layout(pkg).workdir, trajectory=data)
    dropped = outcome.copied.dropped if outcome.copied else []
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "valid": outcome.valid,
                    "rewards": outcome.rewards,
                    "details": outcome.details,
                    "error": outcome.error,
                    "workspace_copy": outcome.copied.as_dict() if outcome.copied else None,
                }
            )
        )
        raise typer.Exit(0 if outcome.valid else 2)
    for line in dropped:
        out.print(Text(f"not in the verifier's copy: {line}"))
    if not outcome.valid:
        out.print(f"[red]INVALID[/] {escape(str(outcome.error))}")
        raise typer.Exit(2)
    table = Table(title=Text(f"{pkg.name}: reward {outcome.reward}"))
    for column in ("component", "kind", "weight", "score", "status", "evidence"):
        table.add_column(column)
    for c in outcome.details.get("components", []):
        score = f"{c['score']:.2f}"
        table.add_row(*_plain(c["id"], c["type"], c["weight"], score, c["status"], c["evidence"]))
    for c in outcome.details.get("red_lines", []):
        score = f"{c['score']:.2f}"
        table.add_row(*_plain(c["id"], "red line", "-", score, c["status"], c["evidence"]))
    out.print(table)


@app.command()
def synth(
    specs: Annotated[
        list[Path] | None, typer.Argument(help="spec YAML files or folders", exists=True)
    ] = None,
    count: Annotated[int, typer.Option(help="sample N specs from the taxonomy")] = 0,
    out_target: Annotated[
        str, typer.Option("--out", help="folder or s3://bucket/prefix for released packages")
    ] = "out/environments",
    workers: Annotated[int, typer.Option(help="parallel environments")] = 2,
    seed: Annotated[int, typer.Option(help="seed of the taxonomy sampler")] = 0,
    max_turns: Annotated[int, typer.Option(help="sampled specs get 1..N user turns")] = 3,
    fault_injection: Annotated[
        float, typer.Option(help="probability that a role emits a deliberate defect")
    ] = 0.0,
    max_iterations: Annotated[int, typer.Option(help="revise budget per environment")] = 3,
    no_harbor_lint: Annotated[
        bool, typer.Option("--no-harbor-lint", help="skip `harbor lint`")
    ] = False,
    backend: Annotated[
        str, typer.Option(help="role backend: procedural, or llm (see docs/llm-backend.md)")
    ] = "procedural",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (llm)")] = None,
    model: Annotated[str | None, typer.Option(help="model name for every LLM role")] = None,
    builder_model: Annotated[str | None, typer.Option(help="Builder's model")] = None,
    builder_base_url: Annotated[str | None, typer.Option(help="Builder's endpoint")] = None,
    verifier_model: Annotated[str | None, typer.Option(help="Verifier Constructor's model")] = None,
    verifier_base_url: Annotated[
        str | None, typer.Option(help="Verifier Constructor's endpoint")
    ] = None,
    llm_review: Annotated[bool, typer.Option(help="add the Issue Detector's LLM review")] = False,
) -> None:
    """Synthesize verified environments on this machine (no cluster; a model only with
    --backend llm)."""
    from .spec import load_specs
    from .synth import Campaign, sampled_specs

    named = [n for path in specs or [] for n in load_specs(path)]
    if count:
        named += sampled_specs(count, seed=seed, max_turns=max_turns)
    if not named:
        raise typer.BadParameter("give spec files/folders, or --count N", param_hint="SPECS")
    if backend not in ("procedural", "llm"):
        raise typer.BadParameter("use 'procedural' or 'llm'", param_hint="--backend")
    for n in named:
        n.spec.fault_injection.probability = fault_injection or n.spec.fault_injection.probability
        n.spec.budget.max_iterations = max_iterations
        if backend == "llm":
            from pydantic import ValidationError

            from .roles.llm import configure_llm_backends

            overrides = {
                "builder": {"model": builder_model, "base_url": builder_base_url},
                "verifier": {"model": verifier_model, "base_url": verifier_base_url},
            }
            try:
                configure_llm_backends(
                    n.spec, base_url=base_url, model=model, roles=overrides, review=llm_review
                )
            except ValidationError as exc:
                raise typer.BadParameter(
                    "--backend llm needs --base-url and --model (or per-role overrides)"
                ) from exc
    from .spec import served_problems

    unserved = [f"{n.name}: {p}" for n in named for p in served_problems(n.spec)]
    if unserved:  # refused before any work, as the Builder stage would refuse them
        raise PackageError(unserved)
    campaign = Campaign(out_target, workers=workers, harbor_lint=not no_harbor_lint)
    outcomes = campaign.run(named, console)
    for table in campaign.summary():
        out.print(table)
    released = sum(o.phase == "Released" for o in outcomes)
    out.print(
        f"{released}/{len(outcomes)} released to {out_target} in {campaign.seconds:.0f}s "
        f"({campaign.cpu_seconds:.0f} CPU-s); manifest: {out_target.rstrip('/')}/manifest.jsonl"
    )
    raise typer.Exit(0 if released else 1)


class ExportFormat(StrEnum):
    atif = "atif"
    hf = "hf"


TRAJECTORIES_HELP = "trajectory JSONL files, or folders of them (read recursively)"


@app.command("filter")
def filter_command(
    inputs: Annotated[list[Path], typer.Argument(help=TRAJECTORIES_HELP, exists=True)],
    out_path: Annotated[Path, typer.Option("--out", help="where the kept trajectories go")],
    report: Annotated[Path | None, typer.Option(help="write the funnel here as JSON")] = None,
    dropped: Annotated[
        Path | None, typer.Option(help="write one JSON line per dropped trajectory (why)")
    ] = None,
    settings_file: Annotated[
        Path | None,
        typer.Option("--settings", exists=True, help="filter settings (YAML/JSON, camelCase)"),
    ] = None,
    drop_truncated: Annotated[
        bool | None,
        typer.Option("--drop-truncated/--keep-truncated", help="budget-ended rollouts"),
    ] = None,
    drop_unrecovered_tool_errors: Annotated[
        bool | None,
        typer.Option(
            "--drop-unrecovered-tool-errors/--keep-unrecovered-tool-errors",
            help="a last tool error never followed by a successful call",
        ),
    ] = None,
    min_reward: Annotated[float | None, typer.Option(help="keep rewards >= this")] = None,
    message_claims: Annotated[
        bool | None,
        typer.Option(
            "--message-claims/--no-message-claims",
            help="read claimed files from the final agent message when none are recorded",
        ),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option(help=f"a rule not to apply (repeatable): {', '.join(RULE_ORDER)}"),
    ] = None,
    packages: Annotated[
        list[str] | None,
        typer.Option(
            "--packages",
            help="the packages rolled out (folders, folders of them, manifest.jsonl, s3://; "
            "repeatable): turns, private user state and verifier weights are checked against "
            "them, by digest",
        ),
    ] = None,
    workspaces: Annotated[
        list[Path] | None,
        typer.Option(
            "--workspaces",
            exists=True,
            file_okay=False,
            help="a folder of stored final workspaces, <trajectory id>/ each (repeatable): "
            "their digests and sizes are recomputed",
        ),
    ] = None,
    skip_unreadable: Annotated[
        bool,
        typer.Option(
            "--skip-unreadable/--strict",
            help="count and log unreadable lines (the default), or stop at the first one",
        ),
    ] = True,
    workers: Annotated[int, typer.Option(min=1, help="processes that parse and judge")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="print the funnel as JSON")] = False,
) -> None:
    """Keep trajectories fit for training; print the funnel (raw → after each rule)."""
    from pydantic import ValidationError

    from .rollout.filters import FilterContext, FilterSettings, filter_files, funnel_table
    from .rollout.reading import TrajectoryReadError

    try:
        base = FilterSettings.load(settings_file) if settings_file else FilterSettings()
        overrides = {
            "drop_truncated": drop_truncated,
            "drop_unrecovered_tool_errors": drop_unrecovered_tool_errors,
            "min_reward": min_reward,
            "parse_claims_from_message": message_claims,
            "skip_rules": skip or None,
        }
        settings = FilterSettings.model_validate(
            {**base.model_dump(), **{k: v for k, v in overrides.items() if v is not None}}
        )
    except (ValueError, ValidationError) as exc:
        console.print(f"[red]invalid filter settings:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:
        context = FilterContext.load(packages or [], workspaces or [])
    except (ValueError, PackageError, OSError) as exc:
        console.print(f"[red]cannot read the packages:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    log = dropped.open("w", encoding="utf-8") if dropped else None
    try:
        funnel = filter_files(
            inputs,
            out_path,
            settings,
            context,
            strict=not skip_unreadable,
            on_drop=None if log is None else _drop_logger(log),
            workers=workers,
        )
    except (TrajectoryReadError, OSError) as exc:
        console.print(f"[red]cannot read trajectories:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    finally:
        if log is not None:
            log.close()
    wire = funnel.model_dump_json(by_alias=True, indent=2)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(wire + "\n", encoding="utf-8")
    if as_json:
        out.print_json(wire)
    else:
        out.print(funnel_table(funnel))
        took = f"{funnel.elapsed_s:.1f} s"
        out.print(f"kept {funnel.kept:,} of {funnel.raw:,} → {out_path}  ({took})")
    unreadable = next((s for s in funnel.stages if s.rule == "readable"), None)
    if unreadable is not None:
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in unreadable.reasons.items())
        console.print(
            f"[yellow]{unreadable.dropped:,} unreadable line(s) skipped[/] ({kinds}); "
            "--strict stops at the first"
        )


def _drop_logger(handle: TextIO) -> Callable[[str, str, Verdict], None]:
    def log(where: str, trajectory_id: str, verdict: Verdict) -> None:
        line = {
            "id": trajectory_id,
            "where": where,
            "rule": verdict.rule,
            "reason": verdict.drop.reason,
            "detail": verdict.drop.detail,
        }
        handle.write(json.dumps(line) + "\n")

    return log


@app.command("export")
def export_command(
    inputs: Annotated[list[Path], typer.Argument(help=TRAJECTORIES_HELP, exists=True)],
    export_format: Annotated[
        ExportFormat,
        typer.Option("--format", help="atif: Harbor trajectory JSON; hf: parquet dataset"),
    ],
    out_path: Annotated[
        Path,
        typer.Option(
            "--out",
            help="atif: a folder (or .jsonl); hf: a .parquet file or a folder (data/train-…)",
        ),
    ],
) -> None:
    """Export trajectories to Harbor's ATIF or a Hugging Face dataset (parquet)."""
    from .rollout.export import ExportError, write_atif, write_hf_dataset
    from .rollout.reading import TrajectoryReadError, input_files, iter_trajectories

    try:
        trajectories = iter_trajectories(input_files(inputs, out_path))
        if export_format is ExportFormat.atif:
            count, written = write_atif(trajectories, out_path), out_path
        else:
            written, count = write_hf_dataset(trajectories, out_path)
    except (TrajectoryReadError, OSError) as exc:
        console.print(f"[red]cannot read trajectories:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except ExportError as exc:
        console.print(f"[red]cannot export:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    out.print(f"exported {count:,} trajectories ({export_format.value}) → {written}")


ROLLOUT_INPUT_HELP = (
    "package folders, folders of packages, manifest.jsonl files (what `synth --out` wrote), "
    "or s3://bucket/prefix/<name> packages"
)


@app.command()
def rollout(
    packages: Annotated[list[str], typer.Argument(help=ROLLOUT_INPUT_HELP)],
    harness: Annotated[
        list[str],
        typer.Option(
            help="harness (repeat for several): oracle, nop, tool-calling, shell-patch, "
            "mini-swe-agent, openai-agents"
        ),
    ] = ["oracle"],  # noqa: B006 - typer reads the default, never mutates it
    model: Annotated[str, typer.Option(help="the policy's model name")] = "none",
    base_url: Annotated[
        str | None, typer.Option(help="the policy's OpenAI-compatible endpoint")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="variable holding the endpoint's key (default COWORKGYM_LLM_API_KEY)"),
    ] = None,
    samples: Annotated[int, typer.Option(min=1, help="rollouts per package and harness")] = 1,
    out_target: Annotated[
        str, typer.Option("--out", help="folder or s3://bucket/prefix for trajectories")
    ] = "out/rollouts",
    workers: Annotated[int, typer.Option(min=1, help="parallel rollouts")] = 2,
    temperature: Annotated[float, typer.Option(help="sampling temperature")] = 0.7,
    max_tokens: Annotated[int | None, typer.Option(help="per completion")] = None,
    seed: Annotated[int | None, typer.Option(help="sampling seed (+ sample index)")] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="model calls per rollout")] = 60,
    timeout: Annotated[
        float | None, typer.Option(help="seconds per rollout (default: the task's agent timeout)")
    ] = None,
    request_timeout: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="seconds per model call before the client retries (a CPU-served model "
            "writing a long reply needs more than the default)",
        ),
    ] = 180.0,
    token_budget: Annotated[int, typer.Option(help="tokens per rollout")] = 2_000_000,
    user_model: Annotated[
        str | None, typer.Option(help="an LLM plays the user (default: scripted)")
    ] = None,
    user_base_url: Annotated[str | None, typer.Option(help="the user model's endpoint")] = None,
    judge_model: Annotated[str | None, typer.Option(help="rubric judge model")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="the judge's endpoint")] = None,
    no_logprobs: Annotated[
        bool, typer.Option(help="do not ask the endpoint for token ids and logprobs")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Roll policies out in released environments, with the stateful user, in local
    sandboxes; verify each trajectory and store it (resumable)."""
    from .llm.settings import LLMSettings, take_api_key
    from .rollout.batch import (
        RolloutBatch,
        find_packages,
        store_for,
        summary_rows,
        summary_table,
        unreachable,
    )
    from .rollout.engine import Endpoint, RolloutEngine, RolloutLimits
    from .rollout.harness import PolicyConfig, harness_names

    known = harness_names()
    unknown = [h for h in harness if h not in known]
    if unknown:
        choose = ", ".join(known)
        raise typer.BadParameter(f"unknown {unknown}; choose from {choose}", param_hint="--harness")
    from .rollout.adapters import missing_library

    driven = [h for h in harness if h not in ("nop", "oracle")]  # the replays need no model
    if driven and not base_url:
        raise typer.BadParameter(
            f"the {', '.join(driven)} harness needs --base-url and --model", param_hint="--base-url"
        )
    for name in harness:
        if (why := missing_library(name)) is not None:
            raise typer.BadParameter(why, param_hint="--harness")

    def endpoint(name: str | None, url: str | None, option: str) -> Endpoint | None:
        if not name:
            return None
        url = url or base_url
        if not url:
            raise typer.BadParameter(f"give {option}-base-url (or --base-url)", param_hint=option)
        key = take_api_key(LLMSettings(model=name, base_url=url, api_key_env=api_key_env))
        return Endpoint(url, name, key)

    urls = {"--base-url": base_url, "--user-base-url": user_base_url}
    urls["--judge-base-url"] = judge_base_url
    for option, url in urls.items():
        why = unreachable(url) if url else None
        if url and why:
            raise typer.BadParameter(f"cannot reach {url}: {why}", param_hint=option)
    try:
        sources = find_packages(packages)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="PACKAGES") from None
    if not sources:
        raise typer.BadParameter("no packages found", param_hint="PACKAGES")
    key = "EMPTY"
    if base_url:
        key = take_api_key(LLMSettings(model=model, base_url=base_url, api_key_env=api_key_env))
    policy = PolicyConfig(
        model=model,
        base_url=base_url,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        max_steps=max_steps,
        request_logprobs=not no_logprobs,
        extra={"request_timeout_s": request_timeout},
    )
    engine = RolloutEngine(
        limits=RolloutLimits(timeout_s=timeout, token_budget=token_budget),
        request_timeout_s=request_timeout,
        user_endpoint=endpoint(user_model, user_base_url, "--user"),
        judge_endpoint=endpoint(judge_model, judge_base_url, "--judge"),
    )
    with engine:
        batch = RolloutBatch(engine, store_for(out_target), policy, api_key=key, workers=workers)
        jobs = batch.jobs(sources, harness, samples)
        result = batch.run(jobs, None if as_json else console)
    if as_json:
        rows = summary_rows(result.batch)
        out.print_json(json.dumps({"location": result.location, "harnesses": rows}))
    else:
        out.print(summary_table(result.batch))
        out.print(
            f"{len(result.trajectories)} rollouts run, {result.skipped} already stored, in "
            f"{result.seconds:.0f}s → {result.location}"
        )
    valid = sum(t.reward is not None for t in result.batch)
    raise typer.Exit(0 if valid or not result.batch else 1)


@app.command("coverage")
def coverage_command(
    manifest: Annotated[
        Path | None,
        typer.Argument(help="manifest.jsonl of released environments (synth --out)", exists=True),
    ] = None,
    families: Annotated[
        bool,
        typer.Option("--families", help="the families: what they serve and would produce"),
    ] = False,
    count: Annotated[int, typer.Option(help="--families: specs a campaign would sample")] = 60,
    seed: Annotated[int, typer.Option(help="--families: seed of the taxonomy sampler")] = 0,
    max_turns: Annotated[int, typer.Option(help="user turns a campaign allows (1..N)")] = 3,
    png: Annotated[Path, typer.Option(help="where to write the heatmap")] = Path("coverage.png"),
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Served and produced counts per (scenario domain × capability) cell, a heatmap PNG, and
    per family and difficulty: turns, inputs, deliverables, verifier components, solve.sh."""
    from .coverage import family_report, heatmap, manifest_report, shape_columns

    if (manifest is None) == (not families):
        raise typer.BadParameter("give a manifest.jsonl or --families (one of them)")
    try:
        report = (
            manifest_report(manifest, max_turns)
            if manifest is not None
            else family_report(count, seed, max_turns)
        )
    except ValueError as exc:
        console.print(f"[red]cannot read the manifest:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    written = heatmap(report, png)
    if as_json:
        out.print_json(json.dumps(report.to_json() | {"heatmap": str(written)}))
        return
    cells = Table(title=f"Cells (scenario domain × primary capability): {report.source}")
    for column in ("domain", "capability", "served by", "produced"):
        cells.add_column(column, justify="right" if column == "produced" else "left")
    for domain, capability in sorted(set(report.served) | set(report.produced)):
        served = report.served.get((domain, capability), [])
        cells.add_row(
            domain,
            capability,
            ", ".join(served) or "[dim]—[/]",
            str(report.produced.get((domain, capability), 0)),
        )
    out.print(cells)
    shapes = Table(title="Per family and difficulty (ranges over the tasks)")
    shapes.add_column("family")
    shapes.add_column("difficulty")
    shapes.add_column("tasks", justify="right")
    for _, title in shape_columns():
        shapes.add_column(title, justify="right")
    for (family, difficulty), shape in sorted(report.shapes.items()):
        spans = [shape.span(name) for name, _ in shape_columns()]
        shapes.add_row(family, difficulty, str(shape.tasks), *spans)
    out.print(shapes)
    produced = sum(report.produced.values())
    out.print(
        f"{len(report.served)} cells served, {len(report.produced)} produced "
        f"({produced} environments, {report.outside_served} outside served cells); "
        f"heatmap: {written}"
    )
    if report.unread:
        out.print(f"[yellow]{len(report.unread)} packages could not be read:[/] "
                  + ", ".join(report.unread[:5]))


# Commands from other installed packages (the training package's `select`): each entry point
# in this group names a `register(app)` function. The core never imports those packages; a
# broken one is reported and the rest of the CLI still works.
COMMAND_ENTRY_POINTS = "cowork_gym.commands"


def _register_entry_point_commands(target: typer.Typer) -> None:
    from importlib.metadata import entry_points

    for entry in entry_points(group=COMMAND_ENTRY_POINTS):
        try:
            entry.load()(target)
        except Exception as exc:  # an optional package's bug must not take the CLI down
            console.print(
                f"[yellow]cowork-gym: commands from {escape(entry.value)} not loaded:[/] "
                f"{escape(str(exc))}"
            )


_register_entry_point_commands(app)


def main() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    configure_logging()
    try:
        app()
    except SandboxUnavailable as exc:
        console.print(f"[red]sandbox unavailable:[/] {escape(str(exc))}")
        sys.exit(3)
    except PackageError as exc:
        console.print(f"[red]invalid input:[/]\n{escape(str(exc))}")
        sys.exit(2)
