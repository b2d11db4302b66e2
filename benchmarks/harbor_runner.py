"""Harbor's own runner on the real Harbor corpus: the evidence check's labels are held to.

    python benchmarks/harbor_runner.py [--corpus DIR] [--tasks GLOB ...] [--agents oracle,nop]
    python benchmarks/harbor_runner.py [--corpus DIR] --markdown   # the records as a table

Harbor runs a task in Docker. This machine has no Docker engine, but Harbor 0.25 also runs
tasks in podman (``harbor run --env podman``): Debian's podman, rootful, with runc (crun
refuses this machine's hybrid cgroups) and podman-compose from PyPI. A task that allows its
phases no network runs in benchmarks/harbor_offline_podman.py's environment, which enforces
that with ``network_mode: none`` (Harbor's own sidecar needs images no registry here has).
No registry serves images here, so every image a task names (``FROM``, ``COPY --from``, a
compose service's ``image:``) is stood in for by the local base ``cowork-gym check`` uses
(coworkgym.image.bases: Debian bookworm for ``ubuntu:*``, a local CPython 3.N for
``python:3.N*``), copied into a podman store of its own and tagged with the name the task
uses. Harbor then builds the task's image, runs its oracle and its no-op agent, and grades
them as it would anywhere; what it concludes is recorded per task in
``harbor-runner.json`` beside the corpus' ``labels.toml`` (merged, so a subset can be rerun)
and printed beside check's label: tests/fixtures/harbor-real/ (other people's tasks, the
default) and tests/fixtures/harbor_tasks/ (``--corpus``: ours, each written to one label).
tests/unit/test_harbor_runner_records.py holds check's labels to these records.

Needs root (podman's overlay store), podman, runc, netavark and aardvark-dns
(``testbed/ci-setup.sh``) and the ``harbor-runner`` extra (podman-compose). Each trial
takes 10-60 s on two cores, most of it podman; a cold task image adds its build.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coworkgym.image import dockerfile
from coworkgym.image.bases import BaseMap, BaseUnavailable
from coworkgym.image.buildah import Buildah, cache_dir
from coworkgym.package.harbor_model import harbor_verdict

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
CORPUS = FIXTURES / "harbor-real"  # other people's tasks; harbor_tasks/ holds our own
RECORDS = "harbor-runner.json"  # in each corpus folder
# podman starts its OCI runtime with at most this many processes, and a container here
# cannot ask for more than its runtime has: containers lack CAP_SYS_RESOURCE.
RUNTIME_NPROC = 32768
ENVIRONMENT = "harbor_offline_podman:OfflinePodman"
VERIFIER_LINES = 7
NOTABLE = re.compile(r"Could not resolve|unable to access|curl: \(|Error|error:|denied|fatal:")
RAISED = re.compile(r"^[A-Za-z_.]*(Error|Exception|Exit)\b.*")


@dataclass(frozen=True)
class Podman:
    """A podman of our own: its store and configuration under ``home``, never the host's."""

    home: Path

    def configure(self) -> dict[str, str]:
        """Write the configuration; the environment that makes podman (and Harbor's calls
        to it) use it."""
        self.home.mkdir(parents=True, exist_ok=True)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], RUNTIME_NPROC)
        (self.home / "containers.conf").write_text(
            "[containers]\n"
            # podman's default (1048576 files) is above this process's hard limit, and
            # raising a limit needs CAP_SYS_RESOURCE
            f'default_ulimits = ["nofile={soft}:{hard}", "nproc={nproc}:{nproc}"]\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'  # no systemd here
            'events_logger = "file"\n'
            "[network]\n"
            # service names resolve (aardvark-dns): a compose sidecar is reached by name
            'network_backend = "netavark"\n'
        )
        (self.home / "storage.conf").write_text(
            "[storage]\n"
            f'driver = "{Buildah.here().driver}"\n'
            f'graphroot = "{self.home / "storage"}"\n'
            f'runroot = "{self.home / "run"}"\n'
        )
        env = dict(os.environ)
        env["CONTAINERS_CONF"] = str(self.home / "containers.conf")
        env["CONTAINERS_STORAGE_CONF"] = str(self.home / "storage.conf")
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        env["PYTHONPATH"] = f"{Path(__file__).parent}:{env.get('PYTHONPATH', '')}"
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm would fetch a price list
        return env


def preflight() -> str | None:
    """Why Harbor's runner cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (podman's overlay store and runc)"
    for tool, how in (
        ("podman", "apt-get install podman runc (testbed/ci-setup.sh)"),
        ("runc", "apt-get install runc"),
        ("/usr/lib/podman/aardvark-dns", "apt-get install netavark aardvark-dns"),
        ("podman-compose", "pip install -e '.[harbor-runner]'"),
        ("harbor", "pip install -e '.[harbor-runner]'"),
    ):
        if shutil.which(tool, path=f"{Path(sys.executable).parent}:{os.environ['PATH']}") is None:
            return f"{tool} is not installed: {how}"
    return Buildah.usable()


def named_images(task: Path) -> dict[str, bool]:
    """Every image the task's environment names (FROM, compose ``image:``, and ``COPY
    --from``: True for those, which check maps by its own rule)."""
    found: dict[str, bool] = {}
    environment = task / "environment"
    for path in sorted(environment.rglob("*Dockerfile*")):
        text = path.read_text(errors="replace")
        found.update((base.image, False) for base in dockerfile.bases(text))
        found.update((image, True) for image in dockerfile.copied_images(text))
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        compose = environment / name
        if compose.is_file():
            raw = yaml.safe_load(compose.read_text()) or {}
            for service in (raw.get("services") or {}).values():
                if isinstance(service, dict) and isinstance(service.get("image"), str):
                    if "build" not in service:
                        found[service["image"]] = False
    return found


def stand_in(env: dict[str, str], buildah: Buildah, bases: BaseMap, ref: str, copied: bool) -> str:
    """Tag check's local image for ``ref`` in our podman store under ``ref`` (again when
    check's has changed since); returns it."""
    local = (
        bases.resolve_copied(buildah, ref)
        if copied
        else bases.resolve(buildah, ref, buildah.root / "logs")
    )
    tagged = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", ref],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if tagged.returncode == 0 and tagged.stdout.strip() == buildah.image_id(local):
        return local
    store = (
        f"containers-storage:[{buildah.driver}@{buildah.root / 'storage'}+{buildah.root / 'run'}]"
    )
    subprocess.run(
        ["podman", "pull", "--quiet", f"{store}{local}"], env=env, check=True, capture_output=True
    )
    subprocess.run(["podman", "tag", local, ref], env=env, check=True, capture_output=True)
    return local


@dataclass
class Trial:
    agent: str
    rewards: dict[str, float] | None  # what the verifier wrote, None when it wrote nothing
    error: str | None  # Harbor's exception (type: first line), or why it did not start
    seconds: float
    verifier_output: list[str] = field(default_factory=list)  # its telling lines
    agent_output: list[str] = field(default_factory=list)  # the agent's (the oracle's)

    @property
    def reward(self) -> float | None:
        if not self.rewards:
            return None
        return self.rewards.get("reward", next(iter(self.rewards.values())))


def run_trial(env: dict[str, str], task: Path, agent: str, jobs: Path) -> Trial:
    name = f"{task.name}-{agent}-{int(time.time())}"
    argv = [
        *("harbor", "run", "--env", ENVIRONMENT, "-a", agent, "-p", str(task)),
        *("-o", str(jobs), "--job-name", name, "-n", "1", "-y", "-q", "--force-build"),
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = round(time.perf_counter() - started, 1)
    results = sorted((jobs / name).glob("*/result.json"))
    if not results:
        refused = "did not start: " + _raised(done.stderr + done.stdout)
        loaded = harbor_verdict(task)  # Harbor's task model says why it took no task there
        if loaded is not None and loaded.problems:
            refused += f" ({loaded.problems[0][:400]})"
        return Trial(agent, None, refused, seconds)
    trial: dict[str, Any] = json.loads(results[0].read_text())
    verdict = trial.get("verifier_result") or {}
    exception = trial.get("exception_info")
    error: str | None = None
    trial_dir = results[0].parent
    verifier = _telling_lines(sorted(trial_dir.rglob("verifier/test-stdout.txt")))
    agent_output = _telling_lines(sorted(trial_dir.rglob("agent/*.txt")))
    if exception:
        message = str(exception.get("exception_message", "")).strip().splitlines()
        error = f"{exception.get('exception_type')}: {message[0] if message else ''}"[:300]
        engine = _engine_error(trial_dir / "exception.txt")
        if engine:
            error += f" [podman: {engine}]"
    return Trial(agent, verdict.get("rewards"), error, seconds, verifier, agent_output)


def _raised(output: str) -> str:
    """The exception Harbor's CLI ended with (its traceback is drawn in boxes)."""
    raised = [line.strip() for line in output.splitlines() if RAISED.match(line.strip())]
    return raised[-1][:300] if raised else output.strip().splitlines()[-1][:300]


def _engine_error(exception: Path) -> str | None:
    """podman's own last error line in Harbor's traceback (a build step, a missing image)."""
    text = exception.read_text(errors="replace") if exception.is_file() else ""
    found = [line.strip() for line in text.splitlines() if line.strip().startswith("Error: ")]
    return found[-1][len("Error: ") :][:200] if found else None


def _telling_lines(files: list[Path]) -> list[str]:
    """What a phase printed that says why (every step's, for a multi-step task): the lines
    that name an error or a host it could not reach, then its last lines."""
    lines: list[str] = []
    for output in files:
        lines += [line for line in output.read_text(errors="replace").splitlines() if line.strip()]
    notable = [line for line in lines if NOTABLE.search(line)][-3:]
    kept = dict.fromkeys(notable + lines[-4:])
    return [line[:200] for line in lines if line in kept][-VERIFIER_LINES:]


def tasks_matching(corpus: Path, patterns: list[str]) -> Iterator[Path]:
    for task in sorted(p for p in corpus.iterdir() if (p / "task.toml").is_file()):
        if any(fnmatch.fnmatchcase(task.name, pattern) for pattern in patterns):
            yield task


def label_task(
    env: dict[str, str],
    buildah: Buildah,
    bases: BaseMap,
    task: Path,
    agents: list[str],
    jobs: Path,
    console: Console,
) -> dict[str, Any]:
    """Stand in for the task's images, then one Harbor trial per agent."""
    entry: dict[str, Any] = {"stand_ins": {}, "trials": {}}
    try:
        for ref, copied in named_images(task).items():
            entry["stand_ins"][ref] = stand_in(env, buildah, bases, ref, copied)
    except (BaseUnavailable, subprocess.CalledProcessError) as exc:
        entry["stand_in_error"] = str(exc)[:300]
    for agent in agents:
        trial = run_trial(env, task, agent, jobs)
        entry["trials"][agent] = {
            "rewards": trial.rewards,
            "error": trial.error,
            "seconds": trial.seconds,
            "verifier_output": trial.verifier_output,
            "agent_output": trial.agent_output,
        }
        console.log(f"{task.name} {agent}: {trial.reward} {trial.error or ''}")
    entry["date"] = datetime.now(UTC).strftime("%Y-%m-%d")
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=["*"], help="globs over task folders")
    parser.add_argument("--agents", default="oracle,nop")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="a folder of tasks")
    parser.add_argument("--out", type=Path, help=f"default: CORPUS/{RECORDS}")
    parser.add_argument("--home", type=Path, default=cache_dir().parent / "harbor-runner")
    parser.add_argument(
        "--markdown", action="store_true", help="print the records as a table; run nothing"
    )
    args = parser.parse_args()
    args.out = args.out or args.corpus / RECORDS
    console = Console()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    problem = preflight()
    if problem:
        raise SystemExit(f"Harbor's runner cannot run here: {problem}")
    env = Podman(args.home).configure()
    buildah, bases = Buildah.here(), BaseMap.from_settings()
    records = json.loads(args.out.read_text()) if args.out.is_file() else {"tasks": {}}
    records["harbor"] = metadata.version("harbor")
    records["podman"] = subprocess.run(
        ["podman", "--version"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    labels = _labels(args.corpus)
    table = Table("task", "stand-ins", "oracle", "nop", "check's label", "s")
    jobs = args.home / "jobs" / args.corpus.name
    shutil.rmtree(jobs, ignore_errors=True)  # the last run's; what matters is in the records
    for task in tasks_matching(args.corpus, args.tasks):
        entry = label_task(env, buildah, bases, task, args.agents.split(","), jobs, console)
        records["tasks"][task.name] = entry
        args.out.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
        table.add_row(
            task.name,
            ", ".join(f"{k}→{v.rsplit('/', 1)[-1]}" for k, v in entry["stand_ins"].items()),
            *(_shown(entry["trials"].get(agent)) for agent in ("oracle", "nop")),
            _label(labels.get(task.name, {})),
            str(round(sum(t["seconds"] for t in entry["trials"].values()), 1)),
        )
    console.print(table)


def markdown(records: dict[str, Any]) -> str:
    """The records as the corpus README's table: per task, each agent's reward (or what
    stopped Harbor), why, and the seconds both trials took."""
    rows = ["| task | oracle | nop | why (Harbor's own output) | s |", "|---|---|---|---|---|"]
    for name, entry in sorted(records["tasks"].items()):
        trials = entry["trials"]
        why = _why(entry)
        seconds = round(sum(t["seconds"] for t in trials.values()))
        cells = [_shown(trials.get(agent)) for agent in ("oracle", "nop")]
        rows.append(f"| `{name}` | {cells[0]} | {cells[1]} | {why} | {seconds} |")
    return "\n".join(rows)


def _why(entry: dict[str, Any]) -> str:
    """The line of Harbor's output that says most about the outcome, for a table cell."""
    trials = sorted(entry["trials"].values(), key=lambda t: t is not entry["trials"].get("oracle"))
    errors = [trial["error"] for trial in trials if trial["error"]]
    if errors:
        engine = re.search(r"\[podman: (.*)\]$", errors[0])
        text = engine.group(1) if engine else errors[0]
        if "Value error, " in text:  # Harbor's task model refused the task.toml
            text = "Harbor's TaskConfig: " + text.split("Value error, ", 1)[1]
    else:
        lines = [line for t in trials for line in t.get("agent_output", []) + t["verifier_output"]]
        telling = [line for line in lines if NOTABLE.search(line)] or lines[-1:]
        text = telling[0] if telling else ""
    text = re.sub(r"\S*/harbor-runner/jobs/\S*", "<trial>/", text.replace(f"{FIXTURES}/", ""))
    return " ".join(text.split()).replace("|", "\\|")[:140]


def _labels(corpus: Path) -> dict[str, dict[str, Any]]:
    import tomllib

    return tomllib.loads((corpus / "labels.toml").read_text())


def _shown(trial: dict[str, Any] | None) -> str:
    if trial is None:
        return "-"
    if trial["error"]:
        return str(trial["error"]).split(":", 1)[0]
    rewards = trial["rewards"] or {}
    return ", ".join(f"{v:g}" for v in rewards.values()) or "none"


def _label(label: dict[str, Any]) -> str:
    verdict = label.get("verdict", "?")
    return f"{verdict} {label.get('code') or label.get('reason') or ''}".strip()


if __name__ == "__main__":
    main()
