"""Who a failure on a real public Harbor task belongs to (issue 26, the larger corpus): a
``COPY`` of a path outside the build context and a task without an oracle are the task's
defects; a write to the image outside the working directory (read-only, or a file only
root may write) is this machine's limit; a rejected reference says what the verifier
printed. Pure functions, no buildah needed."""

from __future__ import annotations

from pathlib import Path

from coworkgym.detector.audit import NO_ORACLE, audit
from coworkgym.detector.defects import DefectCode
from coworkgym.detector.environment_limits import unreproduced
from coworkgym.detector.review import _verifier_said
from coworkgym.image.build import _missing_source
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime.local import VerifyOutcome
from coworkgym.sandbox import SandboxResult

TASK = {
    "task.toml": 'schema_version = "1.4"\n[verifier]\ntimeout_sec = 60.0\n',
    "instruction.md": "Write /output/state.json.\n",
    "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /task\nRUN mkdir -p /output\n",
    "tests/test.sh": (
        "#!/bin/bash\ntest -s /output/state.json && echo 1 > /logs/verifier/reward.txt\n"
    ),
    "solution/solve.sh": "#!/bin/bash\necho '{}' > /output/state.json\n",
}


def _task(root: Path, files: dict[str, str]) -> EnvironmentPackage:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return EnvironmentPackage.load(root)


def _failed(output: str, networked: bool = False) -> SandboxResult:
    return SandboxResult(exit_code=1, stdout="", stderr=output, duration_s=0.1, networked=networked)


BUILD_LOG = """\
STEP 1/3: FROM localhost/cowork-gym/check-base/debian:bookworm
STEP 2/3: RUN apt-get update && apt-get install -y python3
Setting up python3 (3.11.2-1+b1) ...
STEP 3/3: COPY {source} /app/{source}
Error: building at STEP "COPY {source} /app/{source}": checking on sources under \
"/root/.cache/cowork-gym/images/.context-x": copier: stat: "/{path}": no such file or directory
"""


def test_a_copy_from_outside_the_build_context_is_the_tasks_defect() -> None:
    why = _missing_source(BUILD_LOG.format(source="solution/", path="solution"))
    assert why is not None
    assert "copies solution" in why and "build context (environment/)" in why


def test_a_missing_source_the_loader_left_out_is_not_blamed_on_the_task() -> None:
    log = BUILD_LOG.format(source="__pycache__/", path="__pycache__")
    assert _missing_source(log) is None  # the package loader drops __pycache__: ours


def test_other_build_failures_are_not_a_missing_source() -> None:
    log = "STEP 2/2: RUN curl -fsSL https://astral.sh/uv/install.sh | sh\ncurl: (6) Could not"
    assert _missing_source(log) is None


def test_a_solution_writing_outside_the_workdir_is_this_machines_limit(tmp_path: Path) -> None:
    pkg = _task(tmp_path, TASK)
    run = _failed("OSError: [Errno 30] Read-only file system: '/output/state.json'")
    reason = unreproduced(pkg, "agent", run, [])
    assert reason is not None
    assert "the solution writes outside the working directory (/output/state.json" in reason


def test_a_verifier_writing_its_score_under_tests_is_this_machines_limit(tmp_path: Path) -> None:
    pkg = _task(tmp_path, TASK)
    reason = unreproduced(
        pkg, "verifier", _failed("bash: /tests/score.txt: Read-only file system"), []
    )
    assert reason is not None and "the verifier writes" in reason and "/tests/score.txt" in reason


def test_a_write_into_a_file_only_root_may_write_is_this_machines_limit(tmp_path: Path) -> None:
    pkg = _task(tmp_path, TASK)
    run = _failed("PermissionError: [Errno 13] Permission denied: '/etc/app/config.ini'")
    reason = unreproduced(pkg, "agent", run, [], workdir="/task")
    assert reason is not None
    assert "the solution writes where only root may (/etc/app/config.ini" in reason


def test_a_refusal_in_the_workdir_or_the_tests_stays_the_tasks(tmp_path: Path) -> None:
    pkg = _task(tmp_path, TASK)
    for output in (
        "bash: /tests/run_checks.sh: Permission denied",  # not executable: in Harbor too
        "bash: /task/bin/tool: Permission denied",
        "bash: ./tool: Permission denied",
    ):
        assert unreproduced(pkg, "verifier", _failed(output), [], workdir="/task") is None


def test_a_plain_failure_stays_the_tasks(tmp_path: Path) -> None:
    pkg = _task(tmp_path, TASK)
    failure = _failed("Traceback ...\nKeyError: 'rows'")
    assert unreproduced(pkg, "agent", failure, []) is None


def test_a_task_without_an_oracle_is_an_error(tmp_path: Path) -> None:
    files = {rel: text for rel, text in TASK.items() if not rel.startswith("solution/")}
    found = [d for d in audit(_task(tmp_path, files)) if d.code == DefectCode.PACKAGE_STRUCTURE]
    assert [d.severity for d in found] == ["error"]
    assert found[0].evidence["absent"] == NO_ORACLE and "nothing shows" in found[0].message


def test_a_rejected_reference_says_what_the_verifier_printed() -> None:
    printed = _failed("collected 1 item\n" * 40 + "/usr/bin/python3: No module named pytest\n")
    outcome = VerifyOutcome(valid=True, reward=0.0, rewards={"reward": 0.0}, run=printed)
    said = _verifier_said(outcome)
    assert said.endswith("No module named pytest") and len(said) <= 300
    assert _verifier_said(VerifyOutcome(valid=True, reward=0.0)) == ""


def test_a_missing_host_outranks_the_read_only_image(tmp_path: Path) -> None:
    fetching = (
        "#!/bin/bash\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/install.sh | sh\n"
    )
    pkg = _task(tmp_path, {**TASK, "tests/test.sh": fetching})
    output = (
        "E: Could not open lock file /var/lib/apt/lists/lock - open (30: Read-only file system)\n"
        "curl: (6) Could not resolve host: astral.sh\n"
    )
    reason = unreproduced(pkg, "verifier", _failed(output, networked=True), [])
    assert reason is not None and "astral.sh" in reason and "Read-only" not in reason


def test_a_downloader_missing_from_the_image_stays_the_tasks(tmp_path: Path) -> None:
    # python:3.N-slim has no curl: no network would have let this verifier fetch its checker
    fetching = "#!/bin/bash\ncurl -fsSL -o /tmp/c.py https://raw.githubusercontent.com/o/c.py\n"
    pkg = _task(tmp_path, {**TASK, "tests/test.sh": fetching})
    run = _failed("/tests/test.sh: line 2: curl: command not found\n", networked=True)
    assert unreproduced(pkg, "verifier", run, []) is None


def test_a_tool_the_phase_meant_to_download_is_still_the_networks(tmp_path: Path) -> None:
    fetching = "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nuvx pytest\n"
    pkg = _task(tmp_path, {**TASK, "tests/test.sh": fetching})
    run = _failed("/tests/test.sh: line 3: uvx: command not found\n", networked=True)
    reason = unreproduced(pkg, "verifier", run, [])
    assert reason is not None and "astral.sh" in reason


def test_a_downloader_the_phase_installs_first_is_missing_for_want_of_root(
    tmp_path: Path,
) -> None:
    # Harbor's usual verifier: apt-get install curl (refused here, where the sandbox is not
    # root), then curl | sh from astral.sh: what stops it is this machine, not the task
    fetching = (
        "#!/bin/bash\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/install.sh | sh\n"
    )
    pkg = _task(tmp_path, {**TASK, "tests/test.sh": fetching})
    run = _failed("/tests/test.sh: line 3: curl: command not found\n", networked=True)
    reason = unreproduced(pkg, "verifier", run, [])
    assert reason is not None and "astral.sh" in reason
