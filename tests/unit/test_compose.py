"""Reading a Harbor task's docker-compose.yaml (issue 26): its services besides main, their
build, environment (``${VAR:-default}``), command, volumes, healthcheck and start order, and
what it adds to main; what check cannot give is refused by name."""

from __future__ import annotations

import pytest

from coworkgym.image.compose import (
    ComposeUnsupported,
    Healthcheck,
    Volume,
    duration_s,
    interpolate,
    parse,
)
from coworkgym.image.services import service_package
from coworkgym.package.package import EnvironmentPackage

SIDECAR = """
services:
  tool:
    build:
      context: ./tool_service
    environment:
      GMAIL_USER: ${GMAIL_USER:-user@example.com}
      FORCE: ${FORCE:-}
    volumes:
      - tool_log:/var/log/api
    healthcheck:
      test: ["CMD", "python", "-c", "print('ok')"]
      interval: 3s
      timeout: 10s
      retries: 10
  main:
    environment:
      TOOL_SERVICE_URL: http://tool:8080
    volumes:
      - tool_log:/srv/tool-log:ro
    depends_on:
      tool:
        condition: service_healthy
volumes:
  tool_log:
"""


def test_a_sidecar_and_what_main_gets() -> None:
    compose = parse(SIDECAR, {})
    (tool,) = compose.services
    assert tool.name == "tool" and tool.context == "tool_service"
    assert tool.dockerfile == "Dockerfile" and tool.image is None
    assert tool.environment == {"GMAIL_USER": "user@example.com", "FORCE": ""}
    assert tool.volumes == (Volume("/var/log/api", read_only=False, name="tool_log"),)
    assert tool.healthcheck == Healthcheck(
        ("python", "-c", "print('ok')"), interval_s=3.0, timeout_s=10.0, retries=10
    )
    assert compose.main.environment == {"TOOL_SERVICE_URL": "http://tool:8080"}
    assert compose.main.volumes == (Volume("/srv/tool-log", read_only=True, name="tool_log"),)
    assert compose.main.depends_on == {"tool": "service_healthy"}


def test_variables_come_from_the_mapping_given_never_the_process() -> None:
    compose = parse(SIDECAR, {"GMAIL_USER": "someone@example.org", "PATH": "/x"})
    assert compose.services[0].environment["GMAIL_USER"] == "someone@example.org"
    assert interpolate("${PATH:-none}", {}) == "none"  # this process's PATH is not read


@pytest.mark.parametrize(
    ("text", "variables", "expected"),
    [
        ("${A:-d}", {}, "d"),
        ("${A:-d}", {"A": ""}, "d"),  # ':-' takes the default when set but empty
        ("${A-d}", {"A": ""}, ""),  # '-' only when unset
        ("${A-d}", {}, "d"),
        ("${A}", {"A": "x"}, "x"),
        ("$A/b", {"A": "x"}, "x/b"),
        ("${A}", {}, ""),
        ("cost $$5", {}, "cost $5"),
    ],
)
def test_interpolation_follows_compose(text: str, variables: dict[str, str], expected: str) -> None:
    assert interpolate(text, variables) == expected


def test_environment_as_a_list_and_commands_as_a_string_or_a_list() -> None:
    compose = parse(
        "services:\n  api:\n    image: redis:7\n    environment: [A=1, 'B=${B:-2}']\n"
        "    command: redis-server --port 7000\n    entrypoint: [/bin/tini, --]\n",
        {},
    )
    (api,) = compose.services
    assert api.image == "redis:7" and api.context is None
    assert api.environment == {"A": "1", "B": "2"}
    assert api.command == ("/bin/sh", "-c", "redis-server --port 7000")
    assert api.entrypoint == ("/bin/tini", "--")


@pytest.mark.parametrize(
    ("test", "argv"),
    [
        (
            ["CMD-SHELL", "curl -f http://localhost/"],
            ("/bin/sh", "-c", "curl -f http://localhost/"),
        ),
        ("pg_isready", ("/bin/sh", "-c", "pg_isready")),
        (["CMD", "true"], ("true",)),
    ],
)
def test_healthcheck_forms(test: object, argv: tuple[str, ...]) -> None:
    import yaml

    text = yaml.safe_dump({"services": {"db": {"image": "x", "healthcheck": {"test": test}}}})
    check = parse(text, {}).services[0].healthcheck
    assert check is not None and check.argv == argv
    assert (check.interval_s, check.timeout_s, check.retries) == (30.0, 30.0, 3)  # Docker's


def test_a_disabled_healthcheck_is_none() -> None:
    text = "services:\n  db:\n    image: x\n    healthcheck:\n      test: [NONE]\n"
    assert parse(text, {}).services[0].healthcheck is None


@pytest.mark.parametrize(
    ("raw", "seconds"), [("1m30s", 90.0), ("500ms", 0.5), ("3s", 3.0), (5, 5.0), ("1h", 3600.0)]
)
def test_durations(raw: object, seconds: float) -> None:
    assert duration_s(raw, 0.0) == seconds


def test_a_malformed_duration_is_refused() -> None:
    with pytest.raises(ComposeUnsupported, match="3 seconds"):
        duration_s("3 seconds", 0.0)


def test_services_start_after_what_they_depend_on() -> None:
    text = (
        "services:\n  web:\n    image: w\n    depends_on: [db, cache]\n"
        "  cache:\n    image: c\n    depends_on: [db]\n  db:\n    image: d\n"
    )
    assert [s.name for s in parse(text, {}).services] == ["db", "cache", "web"]


def test_a_dependency_cycle_is_refused() -> None:
    text = (
        "services:\n  a:\n    image: a\n    depends_on: [b]\n"
        "  b:\n    image: b\n    depends_on: [a]\n"
    )
    with pytest.raises(ComposeUnsupported, match="cycle"):
        parse(text, {})


def test_an_undefined_dependency_is_refused() -> None:
    with pytest.raises(ComposeUnsupported, match="depends on db, not defined"):
        parse("services:\n  main:\n    depends_on: [db]\n", {})


@pytest.mark.parametrize(
    ("volume", "why"),
    [
        ("/var/run/docker.sock:/var/run/docker.sock", "outside the task's environment/"),
        ("../secrets:/secrets", "outside the task's environment/"),
        ("/data", "anonymous volume /data"),
    ],
)
def test_what_check_cannot_mount_is_named(volume: str, why: str) -> None:
    with pytest.raises(ComposeUnsupported, match=why):
        parse(f"services:\n  api:\n    image: x\n    volumes: ['{volume}']\n", {})


def test_a_directory_of_the_context_is_a_bind_mount() -> None:
    text = "services:\n  api:\n    image: x\n    volumes: ['./data:/data:ro']\n"
    assert parse(text, {}).services[0].volumes == (Volume("/data", True, context_dir="data"),)


def test_a_service_needs_build_or_image() -> None:
    with pytest.raises(ComposeUnsupported, match="neither build nor image"):
        parse("services:\n  api:\n    environment: {A: 1}\n", {})


def test_no_services_is_main_alone() -> None:
    compose = parse("", {})
    assert compose.services == () and compose.main.name == "main"


def _task(files: dict[str, str]) -> EnvironmentPackage:
    task = {"task.toml": 'schema_version = "1.2"\n[task]\nname = "org/sidecar"\n', **files}
    return EnvironmentPackage.from_files({k: v.encode() for k, v in task.items()})


def test_a_service_is_built_from_its_own_context() -> None:
    pkg = _task(
        {
            "environment/Dockerfile": "FROM python:3.12-slim\n",
            "environment/tool_service/Dockerfile": "FROM python:3.12-slim\nCOPY app.py .\n",
            "environment/tool_service/app.py": "print('serving')\n",
        }
    )
    view = service_package(pkg, parse(SIDECAR, {}).services[0])
    assert view.under("environment") == {
        "Dockerfile": b"FROM python:3.12-slim\nCOPY app.py .\n",
        "app.py": b"print('serving')\n",
    }
    assert view.name == "org/sidecar"


def test_a_service_of_an_image_alone_is_one_from_line() -> None:
    pkg = _task({"environment/Dockerfile": "FROM python:3.12-slim\n"})
    service = parse("services:\n  cache:\n    image: redis:7\n", {}).services[0]
    assert service_package(pkg, service).under("environment") == {"Dockerfile": b"FROM redis:7\n"}


def test_a_service_whose_dockerfile_is_missing_is_the_tasks_defect() -> None:
    from coworkgym.image.build import DockerfileBroken

    pkg = _task({"environment/Dockerfile": "FROM python:3.12-slim\n"})
    service = parse("services:\n  api:\n    build: {context: ., dockerfile: Api.Dockerfile}\n", {})
    with pytest.raises(DockerfileBroken, match=r"environment/Api\.Dockerfile is missing"):
        service_package(pkg, service.services[0])
