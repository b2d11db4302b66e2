"""pytest plugin for the test-bed.

Register it in a conftest.py: `pytest_plugins = ["coworkgym_testbed.pytest_plugin"]`.

- Tests marked `@pytest.mark.testbed` run only with `--testbed` or COWORKGYM_TESTBED=1;
  otherwise they are skipped, with the reason saying how to enable them.
- `testbed` (session): a running `Testbed`. A healthy test-bed already running in the run
  dir ($COWORKGYM_TESTBED_DIR or <rootdir>/.testbed, e.g. from `make testbed-up`) is reused
  and left running; otherwise one is started and stopped at the end of the session.
- `testbed_env` (function): the same, with KUBECONFIG, AWS_* and COWORKGYM_S3_* set in
  os.environ for the test (for code that reads the environment, like kopf's login).
- `testbed_namespace` (function): a fresh namespace, deleted after the test.
- When a test that used the test-bed fails, the tail of each component's log is attached
  to its report.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from .testbed import Testbed, default_run_dir, up

ENV_FLAG = "COWORKGYM_TESTBED"
SKIP_REASON = (
    "needs the Kubernetes/S3 test-bed: run with --testbed or COWORKGYM_TESTBED=1 "
    "(binaries from testbed/build.sh)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("testbed").addoption(
        "--testbed",
        action="store_true",
        help="run tests marked `testbed` against the local Kubernetes/S3 test-bed "
        f"(same as {ENV_FLAG}=1)",
    )


def enabled(config: pytest.Config) -> bool:
    flag = os.environ.get(ENV_FLAG, "").strip().lower() in ("1", "true", "yes")
    return bool(config.getoption("--testbed")) or flag


def _run_dir(config: pytest.Config) -> Path:
    return (
        default_run_dir()
        if os.environ.get("COWORKGYM_TESTBED_DIR")
        else config.rootpath / ".testbed"
    )


def pytest_report_header(config: pytest.Config) -> str:
    state = (
        f"on, run dir {_run_dir(config)}" if enabled(config) else f"off (--testbed or {ENV_FLAG}=1)"
    )
    return f"testbed: {state}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if enabled(config):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if "testbed" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def testbed(request: pytest.FixtureRequest) -> Iterator[Testbed]:
    if not enabled(request.config):
        pytest.skip(SKIP_REASON)
    tb, started = up(_run_dir(request.config))
    yield tb
    if started:
        tb.stop()


@pytest.fixture
def testbed_env(testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> Testbed:
    for key, value in testbed.env().items():
        monkeypatch.setenv(key, value)
    return testbed


@pytest.fixture
def testbed_namespace(testbed: Testbed) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    testbed.kubectl("create", "namespace", name)
    yield name
    # The controller-manager finishes the deletion; no need to wait for it.
    testbed.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and "testbed" in getattr(item, "fixturenames", ()):
        tb = Testbed.load(_run_dir(item.config))
        if tb is not None:
            report.sections.append(("test-bed component logs (last lines)", tb.logs_tail()))
    return report
