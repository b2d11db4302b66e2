"""What this machine cannot reproduce of a task's own environment, and when a failure is
therefore ours to explain rather than the task's defect.

Three gaps matter today: the network (an emulated phase has none; a phase in the task's image
has the machine's, where only the Debian and PyPI registries answer, so a host elsewhere
does not), and a plain Harbor task's Dockerfile ``RUN`` lines when the image is emulated
(the inputs, packages and services they would create are missing), and the image's file
system outside the working directory, which a phase here cannot write (Harbor's container
is writable everywhere: a solution may write ``/output/``, a verifier ``/tests/score.txt``).
A failure that one of these gaps can explain makes the task "could not run here", with the
reason (the host that did not answer, the path it could not write); never a defect.
"""

from __future__ import annotations

import re
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

        fetches = NETWORK_COMMAND.search(scripts_of(pkg, phase))
        missing_tool = fetches and MISSING_TOOL.search(output)
        return bool(unreachable_host(output) or NETWORK_FAILURE.search(output) or missing_tool)
    return bool(NETWORK_FAILURE.search(output) or NETWORK_COMMAND.search(scripts_of(pkg, phase)))


# A tool the phase meant to download (a silent ``curl -s ... | sh``) is not there.
MISSING_TOOL = re.compile(r"command not found|No such file or directory", re.IGNORECASE)
URL_HOST = re.compile(r"https?://([\w-]+(?:\.[\w-]+)+)")


def unreproduced(
    pkg: EnvironmentPackage, phase: Phase, run: SandboxResult | None, skipped: list[str]
) -> str | None:
    """Why a failed ``phase`` run may be this machine's fault, or None if it is the task's."""
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
    read_only = _read_only_write(run)
    if read_only is not None:
        where = "verifier" if phase == "verifier" else "solution"
        return (
            f"the {where} writes outside the working directory ({read_only}: Read-only file "
            "system); Harbor's container is writable everywhere, but here only the working "
            "directory is"
        )
    runs = [line for line in skipped if line.upper().startswith("RUN") or "--from=" in line]
    if runs:
        return (
            f"environment/Dockerfile has {len(runs)} RUN line(s) (or COPY --from another "
            f"image) not executed here (first: {runs[0][:80]!r}); what they install or "
            "create is missing"
        )
    return None


# What a process prints when it writes where the sandbox's image is read-only, and the
# path it names on that line (Python quotes it after the words, the shell before them).
READ_ONLY_LINE = re.compile(r"^.*Read-only file system.*$", re.MULTILINE)
ABSOLUTE_PATH = re.compile(r"(/[\w.@+-]+)+")


def _read_only_write(run: SandboxResult | None) -> str | None:
    """The path a failed run could not write because the image is read-only here (or "a
    path" when the output does not name it); None when that is not why it failed."""
    if run is None:
        return None
    line = READ_ONLY_LINE.search(f"{run.stdout}\n{run.stderr}")
    if line is None:
        return None
    path = ABSOLUTE_PATH.search(line.group(0))
    return path.group(0) if path else "a path"


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
