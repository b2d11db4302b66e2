"""What this machine cannot reproduce of a task's own environment, and when a failure is
therefore ours to explain rather than the task's defect.

Three gaps matter today: the network (an emulated phase has none; a phase in the task's image
has the machine's, where only the Debian and PyPI registries answer, so a host elsewhere
does not), and a plain Harbor task's Dockerfile ``RUN`` lines when the image is emulated
(the inputs, packages and services they would create are missing), and root. Harbor's
phases run as root in a container writable everywhere; here the image's root is writable
over an overlay (``sandbox.overlay``: a solution may write ``/output/``, a verifier
``/tests/score.txt``) but the phases are not root: they own the image's directories, not
its files, so writing into a file the build left is refused (and where no overlay can be
mounted, or the phase is emulated, nothing outside the working directory is writable).
A failure that one of these gaps can explain makes the task "could not run here", with the
reason (the host that did not answer, the path it could not write); never a defect.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from ..package.package import EnvironmentPackage
from ..sandbox import SandboxResult

Phase = Literal["agent", "verifier"]
PHASES: tuple[Phase, ...] = ("agent", "verifier")

# Commands that fetch from the network, as task scripts write them.
NETWORK_COMMAND = re.compile(
    r"\b(curl|wget|pip3?\s+install|uv\s+(pip|run|sync|add|tool)|uvx|apt(-get)?\s+install|"
    r"npm\s+(install|ci)|git\s+clone|go\s+(get|install)|cargo\s+install)\b|https?://"
)
# What a process prints when the network it reached for is not there.
NETWORK_FAILURE = re.compile(
    r"(Could not resolve host|Temporary failure in name resolution|Name or service not known|"
    r"Network is unreachable|getaddrinfo|Failed to establish a new connection|"
    r"No route to host|ConnectionError|nodename nor servname|Failed to fetch)",
    re.IGNORECASE,
)


def network_allowed(pkg: EnvironmentPackage, phase: Phase) -> bool:
    """The task's network policy for a phase: its own override, else the environment's."""
    section = pkg.config.verifier if phase == "verifier" else pkg.config.agent
    mode = section.network_mode or pkg.config.environment.network_mode
    return mode != "no-network"


def scripts_of(pkg: EnvironmentPackage, phase: Phase) -> str:
    prefixes = ("tests/",) if phase == "verifier" else ("solution/",)
    steps = ("/tests/",) if phase == "verifier" else ("/solution/",)
    return "\n".join(
        content.decode("utf-8", errors="replace")
        for rel, content in pkg.files.items()
        if (rel.startswith(prefixes) or (rel.startswith("steps/") and any(s in rel for s in steps)))
        and rel.endswith((".sh", ".py", ".txt", ".toml", ".cfg"))
    )


def needs_network(pkg: EnvironmentPackage, phase: Phase, run: SandboxResult | None) -> bool:
    """The phase may use the network its task allows, and this run plausibly tried to
    (with the network: and failed to reach a host; without: and there was none)."""
    if not network_allowed(pkg, phase):
        return False
    output = f"{run.stdout}\n{run.stderr}" if run is not None else ""
    if run is not None and run.networked:
        from ..image.build import unreachable_host

        scripts = scripts_of(pkg, phase)
        fetches = NETWORK_COMMAND.search(scripts)
        missing_tool = (
            fetches and MISSING_TOOL.search(output) and not _lacks_fetcher(output, scripts)
        )
        return bool(unreachable_host(output) or NETWORK_FAILURE.search(output) or missing_tool)
    return bool(NETWORK_FAILURE.search(output) or NETWORK_COMMAND.search(scripts_of(pkg, phase)))


# A tool the phase meant to download (a silent ``curl -s ... | sh``) is not there.
MISSING_TOOL = re.compile(r"command not found|No such file or directory", re.IGNORECASE)
# The downloader itself is missing (python:3.N-slim has no curl).
MISSING_FETCHER = re.compile(r"\b(curl|wget|git): (command )?not found")


def _lacks_fetcher(output: str, scripts: str) -> bool:
    """The image lacks the downloader and the phase never installs it: it never reached
    for the network, and no network would have helped. (One it installs first is missing
    because the install failed here: no registry, or no root.)"""
    missing = MISSING_FETCHER.search(output)
    if missing is None:
        return False
    installs = rf"\b(apt(-get)?|apk|yum|dnf)\s+(install|add)\b[^\n]*\b{missing.group(1)}\b"
    return re.search(installs, scripts) is None


URL_HOST = re.compile(r"https?://([\w-]+(?:\.[\w-]+)+)")


def unreproduced(
    pkg: EnvironmentPackage,
    phase: Phase,
    run: SandboxResult | None,
    skipped: list[str],
    workdir: str | None = None,
) -> str | None:
    """Why a failed ``phase`` run may be this machine's fault, or None if it is the task's.
    ``workdir``: the working directory, whose files the phase owns (a refusal there is
    the task's)."""
    if pkg.is_cowork:
        return None  # our own packages declare no network and build no RUN-made inputs
    if needs_network(pkg, phase, run):
        where = "verifier" if phase == "verifier" else "solution"
        seen = _first_network_failure(run)
        if run is not None and run.networked:
            return _unreachable(pkg, phase, run, where)
        return f"the {where} may use the network its task allows, and this sandbox has none" + (
            f" ({seen})" if seen else ""
        )
    # after the network: a verifier that apt-installs curl (writing /var/lib/apt) to fetch
    # from astral.sh would still miss the host on a writable image
    where = "verifier" if phase == "verifier" else "solution"
    read_only = _refused_write(run, READ_ONLY_LINE)
    if read_only is not None:
        return (
            f"the {where} writes outside the working directory ({read_only}: Read-only file "
            "system); Harbor's container is writable everywhere, but here only the working "
            "directory is"
        )
    roots_file = _denied_write(run, workdir) if workdir is not None else None
    if roots_file is not None:
        return (
            f"the {where} writes where only root may ({roots_file}: Permission denied); "
            "Harbor runs its phases as root, this sandbox as a user who owns the image's "
            "directories but not the files its build left"
        )
    runs = [line for line in skipped if line.upper().startswith("RUN") or "--from=" in line]
    if runs:
        return (
            f"environment/Dockerfile has {len(runs)} RUN line(s) (or COPY --from another "
            f"image) not executed here (first: {runs[0][:80]!r}); what they install or "
            "create is missing"
        )
    return None


# What a process prints when it writes where the sandbox's image is read-only, or where
# only root may write, and the path it names on that line (Python quotes it after the
# words, the shell before them).
READ_ONLY_LINE = re.compile(r"^.*Read-only file system.*$", re.MULTILINE)
DENIED_LINE = re.compile(r"^.*Permission denied.*$", re.MULTILINE)
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])(/[\w.@+-]+)+")  # not ./x, a/b, ~/x
# What the sandbox mounts itself, owned by the phase or meant to be read-only in Harbor too:
# a refusal there is not root's missing.
SANDBOX_MOUNTS = ("/tests", "/solution", "/logs", "/cowork-extra", "/tmp")


def _refused_write(run: SandboxResult | None, refusal: re.Pattern[str]) -> str | None:
    """The path a failed run was refused as ``refusal`` says (or "a path" when the output
    does not name it); None when that is not why it failed."""
    if run is None:
        return None
    line = refusal.search(f"{run.stdout}\n{run.stderr}")
    if line is None:
        return None
    path = ABSOLUTE_PATH.search(line.group(0))
    return path.group(0) if path else "a path"


def _denied_write(run: SandboxResult | None, workdir: str) -> str | None:
    """The first path outside the sandbox's own mounts and the working directory that a
    failed run was denied (the image's, root's); None when there is none."""
    if run is None:
        return None
    exempt = (*SANDBOX_MOUNTS, workdir)
    for line in DENIED_LINE.finditer(f"{run.stdout}\n{run.stderr}"):
        path = ABSOLUTE_PATH.search(line.group(0))
        if path is not None and not any(
            PurePosixPath(path.group(0)).is_relative_to(place) for place in exempt
        ):
            return path.group(0)
    return None


def _first_network_failure(run: SandboxResult | None) -> str:
    """What the run printed of the network it missed: the host, where the output names it."""
    if run is None:
        return ""
    from ..image.build import unreachable_host

    output = f"{run.stdout}\n{run.stderr}"
    host = unreachable_host(output)
    found = NETWORK_FAILURE.search(output)
    if host is not None:
        return f"{found.group(0) if found else 'unreachable'}: {host}"
    return found.group(0) if found else ""


def _unreachable(pkg: EnvironmentPackage, phase: Phase, run: SandboxResult, where: str) -> str:
    from ..image.build import (
        REACHABLE,
        REGISTRY_HICCUP,
        REGISTRY_HOSTS,
        UNREACHABLE,
        unreachable_host,
    )

    host = unreachable_host(f"{run.stdout}\n{run.stderr}")
    if host in REGISTRY_HOSTS:
        return f"the {where} failed because {REGISTRY_HICCUP} ({host}); check again"
    if host is None:
        named = sorted(set(URL_HOST.findall(scripts_of(pkg, phase))))
        host = ", ".join(named[:3]) if named else "a host it downloads from"
    return f"the {where} {UNREACHABLE}: {host} (only {REACHABLE} answer here)"
