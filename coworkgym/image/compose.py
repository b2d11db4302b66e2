"""What a plain Harbor task's ``environment/docker-compose.yaml`` asks for besides ``main``.

Harbor merges the task's compose file over its own, which defines ``main`` (the task's
image, where every phase runs). The task may add services beside it (an API server the
agent calls, a simulated user) and give ``main`` environment values, volumes and a
``depends_on``. This module reads that much, and nothing else, into plain data; running it
is ``image.services``' job. What it cannot honour (a bind mount of a host path, a service
with neither ``build`` nor ``image``) is a ``ComposeUnsupported`` naming it, so the task
"could not run" for a stated reason instead of running without it.

Values are interpolated as compose does (``${VAR:-default}``, ``${VAR-default}``,
``${VAR}``, ``$VAR``, ``$$``), from the mapping the caller passes, never from this process's
environment: a credential on the host must not reach a task's service.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
MAIN = "main"


class ComposeUnsupported(ValueError):
    """The compose file asks for something ``check`` cannot give; the message says what."""


@dataclass(frozen=True)
class Volume:
    """A named volume (``name``) or a directory of the build context (``context_dir``,
    relative to ``environment/``), seen at ``target``."""

    target: str
    read_only: bool = False
    name: str | None = None
    context_dir: str | None = None


@dataclass(frozen=True)
class Healthcheck:
    """``argv`` runs in the service's image; healthy once it exits 0 (Docker's rules:
    ``retries`` failures after ``start_period_s`` make it unhealthy)."""

    argv: tuple[str, ...]
    interval_s: float = 30.0
    timeout_s: float = 30.0
    retries: int = 3
    start_period_s: float = 0.0


DependencyCondition = Literal[
    "service_started", "service_healthy", "service_completed_successfully"
]


@dataclass(frozen=True)
class Service:
    name: str
    # what builds its image: a directory of environment/ and the Dockerfile in it, or an
    # image to start from (a Dockerfile of one FROM line)
    context: str | None = None
    dockerfile: str = "Dockerfile"
    image: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] | None = None  # replaces the image's CMD
    entrypoint: tuple[str, ...] | None = None  # replaces the image's ENTRYPOINT
    working_dir: str | None = None
    volumes: tuple[Volume, ...] = ()
    healthcheck: Healthcheck | None = None
    depends_on: dict[str, DependencyCondition] = field(default_factory=dict)


@dataclass(frozen=True)
class Compose:
    """The services besides ``main`` (in an order that starts each after what it depends
    on), and what the compose file adds to ``main`` itself."""

    services: tuple[Service, ...]
    main: Service


def parse(text: str, variables: Mapping[str, str]) -> Compose:
    """The compose file's services; ``variables``: what ``${VAR}`` reads."""
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ComposeUnsupported(f"docker-compose.yaml is not YAML: {exc}") from exc
    services = raw.get("services") if isinstance(raw, dict) else None
    if not isinstance(services, dict):
        return Compose((), Service(MAIN))
    parsed = {
        str(name): _service(str(name), spec or {}, variables) for name, spec in services.items()
    }
    main = parsed.pop(MAIN, Service(MAIN))
    for service in (*parsed.values(), main):
        for needed in service.depends_on:
            if needed not in parsed:
                raise ComposeUnsupported(f"service {service.name} depends on {needed}, not defined")
    return Compose(_in_start_order(parsed), main)


def _service(name: str, spec: object, variables: Mapping[str, str]) -> Service:
    if not isinstance(spec, dict):
        raise ComposeUnsupported(f"service {name} is not a mapping")
    context, dockerfile = None, "Dockerfile"
    build = spec.get("build")
    if isinstance(build, str):
        context = build
    elif isinstance(build, dict):
        context = str(build.get("context", "."))
        dockerfile = str(build.get("dockerfile", "Dockerfile"))
    image = interpolate(str(spec["image"]), variables) if "image" in spec else None
    if name != MAIN and context is None and image is None:
        raise ComposeUnsupported(f"service {name} has neither build nor image")
    healthcheck = spec.get("healthcheck")
    return Service(
        name=name,
        context=_inside_context(context, name) if context is not None else None,
        dockerfile=dockerfile,
        image=image,
        environment=_environment(spec.get("environment"), variables),
        command=_argv(spec.get("command"), variables),
        entrypoint=_argv(spec.get("entrypoint"), variables),
        working_dir=str(spec["working_dir"]) if "working_dir" in spec else None,
        volumes=tuple(_volume(v, name, variables) for v in spec.get("volumes") or ()),
        healthcheck=_healthcheck(healthcheck, variables) if isinstance(healthcheck, dict) else None,
        depends_on=_depends_on(spec.get("depends_on")),
    )


def interpolate(value: str, variables: Mapping[str, str]) -> str:
    """Compose's substitution: ``:-`` takes the default when unset or empty, ``-`` only
    when unset; ``$$`` is a literal ``$``."""

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        name = match.group("braced") or match.group("bare")
        given = variables.get(name)
        operator, default = match.group("operator"), match.group("default") or ""
        if operator == ":-":
            return given if given else default
        if operator == "-":
            return given if given is not None else default
        return given or ""

    return _VARIABLE.sub(substitute, value)


_VARIABLE = re.compile(
    r"(?P<escaped>\$\$)|\$\{(?P<braced>\w+)(?:(?P<operator>:?-)(?P<default>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_]\w*)"
)


def _environment(raw: object, variables: Mapping[str, str]) -> dict[str, str]:
    if isinstance(raw, dict):
        pairs = [(str(k), "" if v is None else str(v)) for k, v in raw.items()]
    elif isinstance(raw, list):
        pairs = [(str(item).partition("=")[0], str(item).partition("=")[2]) for item in raw]
    else:
        return {}
    return {key: interpolate(value, variables) for key, value in pairs}


def _argv(raw: object, variables: Mapping[str, str]) -> tuple[str, ...] | None:
    if isinstance(raw, list):
        return tuple(interpolate(str(part), variables) for part in raw)
    if isinstance(raw, str):
        return ("/bin/sh", "-c", interpolate(raw, variables))
    return None


def _volume(raw: object, service: str, variables: Mapping[str, str]) -> Volume:
    if isinstance(raw, dict):
        source, target = str(raw.get("source", "")), str(raw.get("target", ""))
        read_only = bool(raw.get("read_only", False))
    else:
        text = interpolate(str(raw), variables)
        if ":" not in text:  # a path alone: an anonymous volume there
            raise ComposeUnsupported(f"service {service}: anonymous volume {text} is not supported")
        source, _, rest = text.partition(":")
        target, _, mode = rest.partition(":")
        read_only = "ro" in mode.split(",")
    if not target:
        raise ComposeUnsupported(f"service {service}: volume {raw!r} has no target path")
    if source.startswith((".", "/", "~")):
        return Volume(target, read_only, context_dir=_inside_context(source, service))
    if not source:
        raise ComposeUnsupported(f"service {service}: anonymous volume {target} is not supported")
    return Volume(target, read_only, name=source)


def _inside_context(path: str, service: str) -> str:
    """A path of the task's ``environment/`` (where compose paths are relative to), or
    ComposeUnsupported: a host path outside the task is not this task's to read."""
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or path.startswith("~"):
        raise ComposeUnsupported(f"service {service} uses {path}, outside the task's environment/")
    return str(relative)


def _healthcheck(raw: dict[object, object], variables: Mapping[str, str]) -> Healthcheck | None:
    test = raw.get("test")
    if raw.get("disable") or test in (None, [], ["NONE"]):
        return None
    if isinstance(test, str):
        argv: tuple[str, ...] = ("/bin/sh", "-c", interpolate(test, variables))
    elif isinstance(test, list) and test and test[0] == "CMD-SHELL":
        argv = ("/bin/sh", "-c", interpolate(" ".join(str(t) for t in test[1:]), variables))
    elif isinstance(test, list) and test and test[0] == "CMD":
        argv = tuple(interpolate(str(t), variables) for t in test[1:])
    else:
        raise ComposeUnsupported(f"healthcheck test {test!r} is not CMD, CMD-SHELL or a string")
    return Healthcheck(
        argv,
        interval_s=duration_s(raw.get("interval"), 30.0),
        timeout_s=duration_s(raw.get("timeout"), 30.0),
        retries=int(str(raw.get("retries", 3))),
        start_period_s=duration_s(raw.get("start_period"), 0.0),
    )


def duration_s(raw: object, default: float) -> float:
    """Compose's durations: ``1m30s``, ``500ms``, ``3s``, a bare number of seconds."""
    if raw is None:
        return default
    if isinstance(raw, int | float):
        return float(raw)
    parts = _DURATION.findall(str(raw).strip())
    if not parts or "".join(n + u for n, u in parts) != str(raw).strip():
        raise ComposeUnsupported(f"duration {raw!r} is not like 1m30s")
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 0.000001}


def _depends_on(raw: object) -> dict[str, DependencyCondition]:
    if isinstance(raw, list):
        return {str(name): "service_started" for name in raw}
    if not isinstance(raw, dict):
        return {}
    found: dict[str, DependencyCondition] = {}
    for name, spec in raw.items():
        condition = spec.get("condition") if isinstance(spec, dict) else None
        if condition == "service_healthy":
            found[str(name)] = "service_healthy"
        elif condition == "service_completed_successfully":
            found[str(name)] = "service_completed_successfully"
        else:
            found[str(name)] = "service_started"
    return found


def _in_start_order(services: dict[str, Service]) -> tuple[Service, ...]:
    """Each service after those it depends on (ComposeUnsupported on a cycle)."""
    ordered: list[Service] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if any(s.name == name for s in ordered):
            return
        if name in visiting:
            raise ComposeUnsupported(f"services depend on each other in a cycle through {name}")
        visiting.add(name)
        for needed in services[name].depends_on:
            visit(needed)
        ordered.append(services[name])

    for name in sorted(services):
        visit(name)
    return tuple(ordered)
