"""What `check` needs for real public Harbor tasks (issue 26), as pure functions: images a
``COPY --from`` reads, the host a failed step could not reach, the real error of a failed
base build, near copies of verifier content, unique image names, Harbor's /logs, sidecar
services, and the sandbox's network switch. No buildah needed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from coworkgym.detector.defects import DefectCode
from coworkgym.detector.grader_tamper import forgery_for, success_words
from coworkgym.detector.task_image import compose_of, near_copies_in_context
from coworkgym.image import bases as bases_module
from coworkgym.image.bases import BaseMap, BaseUnavailable, real_error
from coworkgym.image.build import _why, task_slug, unreachable_host
from coworkgym.image.buildah import Buildah
from coworkgym.image.dockerfile import copied_images, rewrite
from coworkgym.image.leaks import ImageFiles, near_output, nearest, similarity, tokens
from coworkgym.package.package import EnvironmentPackage
from coworkgym.runtime.local import harbor_logs
from coworkgym.runtime.workspace import emulate_dockerfile
from coworkgym.sandbox.bwrap import BubblewrapSandbox

UV_DOCKERFILE = """\
FROM python:3.12-slim AS build
COPY --from=ghcr.io/astral-sh/uv:0.8.15 /uv /uvx /bin/
FROM python:3.12-slim
COPY --from=build /app /app
COPY --from=0 /etc/hosts /tmp/hosts
"""


def test_copy_from_an_image_is_told_from_a_stage() -> None:
    assert copied_images(UV_DOCKERFILE) == ["ghcr.io/astral-sh/uv:0.8.15"]
    local = {"python:3.12-slim": "localhost/py", "ghcr.io/astral-sh/uv:0.8.15": "localhost/uv"}
    rewritten = rewrite(UV_DOCKERFILE, lambda image: local[image])
    assert "COPY --from=localhost/uv /uv /uvx /bin/" in rewritten
    assert "COPY --from=build /app /app" in rewritten and "--from=0 " in rewritten


def test_an_image_nobody_stored_is_named_with_the_mapping_to_use(tmp_path: Path) -> None:
    buildah = Buildah(tmp_path)
    buildah._inspected["ghcr.io/example/tool:1.2"] = {}  # answered: not stored
    for ref in ("ghcr.io/example/tool:1.2", "localhost/ghcr.io/example/tool:1.2"):
        buildah._inspected[ref] = {}
    with pytest.raises(BaseUnavailable) as raised:
        BaseMap().resolve_copied(buildah, "ghcr.io/example/tool:1.2")
    message = str(raised.value)
    assert "needs image ghcr.io/example/tool:1.2" in message
    assert "not stored here" in message and "--base-image ghcr.io/example/tool:1.2=" in message
    assert "network" not in message


@pytest.mark.parametrize(
    ("output", "host"),
    [
        ("curl: (6) Could not resolve host: astral.sh", "astral.sh"),
        (
            "W: Failed to fetch http://deb.nodesource.com/x  Temporary failure resolving "
            "'deb.nodesource.com'",
            "deb.nodesource.com",
        ),
        (
            "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com",
            "github.com",
        ),
        (
            "ERROR: HTTPSConnectionPool(host='github.com', port=443): Max retries exceeded",
            "github.com",
        ),
        ("npm error getaddrinfo ENOTFOUND registry.npmjs.org", "registry.npmjs.org"),
        (
            "Resolving notofonts.github.io (notofonts.github.io)... failed: Name or service",
            "notofonts.github.io",
        ),
        ("Step 3 ok", None),
    ],
)
def test_the_unreachable_host_is_named(output: str, host: str | None) -> None:
    assert unreachable_host(output) == host


def test_a_failed_precompile_shows_its_error_not_the_warnings() -> None:
    log = "\n".join(
        [
            "/usr/local/lib/python3.11/foo.py:3: SyntaxWarning: invalid escape sequence '\\d'",
            "  x = '\\d'",
            "      ^^^^",
            "*** Error compiling '/usr/local/lib/python3.11/lib2to3/tests/data/bom.py'...",
            "SyntaxError: invalid syntax",
        ]
    )
    found = real_error(log)
    assert "Error compiling" in found and "SyntaxError" in found
    assert "SyntaxWarning" not in found


def test_stdlib_test_data_is_not_copied_into_the_python_base(tmp_path: Path) -> None:
    prefix = tmp_path / "pyenv" / "3.11.7"
    lib = prefix / "lib" / "python3.11"
    for rel in (
        "lib2to3/tests/data/bom.py",
        "lib2to3/fixer_base.py",
        "json/__init__.py",
        "idlelib/idle_test/x.py",
        "site-packages/pip/tests/ok.py",
    ):
        (lib / rel).parent.mkdir(parents=True, exist_ok=True)
        (lib / rel).write_text("pass\n")
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3.11").write_text("")
    (prefix / "lib" / "libpython3.11.so.1.0").write_text("")
    (prefix / "include" / "python3.11").mkdir(parents=True)
    usr_local = tmp_path / "rootfs" / "usr" / "local"
    bases_module._install_cpython(prefix, "3.11", usr_local)
    copied = usr_local / "lib" / "python3.11"
    assert (copied / "lib2to3" / "fixer_base.py").is_file()
    assert not (copied / "lib2to3" / "tests").exists()
    assert (copied / "json" / "__init__.py").is_file()


def test_a_failed_base_build_is_remembered_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def failing(buildah: Buildah, recipe: object, key: str, log: Path) -> None:
        calls.append(key)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("I: success\n")
        raise subprocess.CalledProcessError(
            1,
            ["chroot", "x", "python3", "-m", "compileall"],
            output=b"Warning: SyntaxWarning\n*** Error compiling 'bad.py'\n",
        )

    monkeypatch.setattr(bases_module, "_build_recipe", failing)
    buildah = Buildah(tmp_path)
    buildah._inspected[bases_module.DebianBase.ref] = {}
    recipe = bases_module.DebianBase()
    for _ in range(2):
        with pytest.raises(BaseUnavailable, match=r"Error compiling 'bad.py'") as raised:
            bases_module._ensure_recipe(buildah, recipe, tmp_path / "logs")
    assert len(calls) == 1  # the second answer came from the remembered failure
    assert "failed before" in str(raised.value) and "log " in str(raised.value)


def test_near_copy_similarity_sees_one_changed_path() -> None:
    grader = "\n".join(
        f"def check_{n}(path='/app/out_{n}.json'):\n    data = load(path)\n"
        f"    assert data['total_{n}'] == expected_{n}, 'total {n} wrong'\n"
        for n in range(6)
    ).encode()
    edited = grader.replace(b"/app/out_3.json", b"/workspace/out_3.json")
    other = b"\n".join(b"print('hello %d world')" % n for n in range(30))
    assert similarity(tokens(grader) or [], tokens(edited) or []) > 0.95
    found = nearest(grader, {"/app/grade.py": edited, "/app/other.py": other})
    assert found is not None and found.where == "/app/grade.py" and found.similarity > 0.95
    assert nearest(b"echo 1 > /logs/verifier/reward.txt", {"/x": b"echo 1"}) is None


def _package(tmp_path: Path, files: dict[str, str]) -> EnvironmentPackage:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return EnvironmentPackage.load(tmp_path)


GRADER = "\n".join(
    f"def test_region_{n}():\n    rows = json.load(open('/app/totals.json'))\n"
    f"    assert rows['region_{n}'] == pytest.approx({n * 17.5}), 'region {n}'\n"
    for n in range(8)
)
TASK_FILES = {
    "task.toml": 'schema_version = "1.4"\n[verifier]\ntimeout_sec = 60.0\n',
    "instruction.md": "Write /app/totals.json.\n",
    "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\nCOPY check_totals.py /app/\n",
    "tests/test.sh": (
        "#!/bin/bash\npytest /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt\n"
    ),
    "tests/test_outputs.py": "import json\nimport pytest\n\n" + GRADER,
    "solution/solve.sh": "#!/bin/bash\necho '{}' > /app/totals.json\n",
}


def test_a_grader_copied_with_one_path_changed_is_a_leak(tmp_path: Path) -> None:
    near = GRADER.replace("/app/totals.json", "/data/totals.json", 1)
    pkg = _package(tmp_path, {**TASK_FILES, "environment/check_totals.py": near})
    (leak,) = near_copies_in_context(pkg)
    assert leak.code == DefectCode.LEAK_VERIFIER_CONTENT and leak.owner == "builder"
    assert leak.evidence["file"] == "environment/check_totals.py"
    assert leak.evidence["source"] == "tests/test_outputs.py"
    assert 0.9 < float(str(leak.evidence["similarity"])) < 1.0


def test_an_unrelated_context_file_is_no_leak(tmp_path: Path) -> None:
    helper = "\n".join(f"def helper_{n}(x):\n    return x * {n} + {n * 3}\n" for n in range(20))
    pkg = _package(tmp_path, {**TASK_FILES, "environment/check_totals.py": helper})
    assert list(near_copies_in_context(pkg)) == []


def test_tasks_without_a_name_get_images_of_their_own(tmp_path: Path) -> None:
    one = _package(tmp_path / "one", TASK_FILES)
    two = _package(tmp_path / "two", TASK_FILES)
    assert one.name == two.name == "unnamed"
    slugs = {task_slug(one, tmp_path / "one"), task_slug(two, tmp_path / "two")}
    assert len(slugs) == 2 and all(s.startswith(("one-", "two-")) for s in slugs)
    assert task_slug(one, tmp_path / "one") == task_slug(one, tmp_path / "one")  # stable


def test_sidecar_services_are_read(tmp_path: Path) -> None:
    compose = "services:\n  main:\n    depends_on: [api]\n  api:\n    build: ./api\n"
    pkg = _package(tmp_path, {**TASK_FILES, "environment/docker-compose.yaml": compose})
    compose = compose_of(pkg)
    assert [s.name for s in compose.services] == ["api"]
    assert compose.main.depends_on == {"api": "service_started"}


def test_harbor_logs_hold_what_harbor_mounts(tmp_path: Path) -> None:
    mount = harbor_logs(tmp_path)
    assert mount.target == "/logs" and mount.writable
    assert sorted(p.name for p in mount.source.iterdir()) == ["agent", "artifacts", "verifier"]


def test_the_sandbox_shares_the_network_only_when_asked(tmp_path: Path) -> None:
    offline = BubblewrapSandbox().command(["true"], [], {}, "/")
    online = BubblewrapSandbox(network=True).command(["true"], [], {}, "/")
    assert "--unshare-net" in offline and "--unshare-net" not in online


def test_the_forged_grader_prints_what_the_verifier_greps_for(tmp_path: Path) -> None:
    test_sh = (
        "#!/bin/bash\npython3 /app/verify.py > /tmp/grade.txt 2>&1\n"
        "if grep -q TOTALS_MATCH /tmp/grade.txt; then echo 1 > /logs/verifier/reward.txt; fi\n"
    )
    pkg = _package(tmp_path, {**TASK_FILES, "tests/test.sh": test_sh})
    words = success_words(pkg)
    assert words == ("TOTALS_MATCH",)
    forged = tmp_path / "verify.py"
    forged.write_text(forgery_for("verify.py", words).replace("/logs/verifier", str(tmp_path)))
    printed = subprocess.run(
        ["python3", str(forged)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert "TOTALS_MATCH" in printed and "SUCCESS" in printed


def test_emulated_copy_of_a_file_into_the_workdir_lands_inside_it(tmp_path: Path) -> None:
    dockerfile = "FROM ubuntu:24.04\nWORKDIR /app\nCOPY make.py /app\nRUN python3 make.py\n"
    files = {**TASK_FILES, "environment/Dockerfile": dockerfile, "environment/make.py": "x=1\n"}
    found = emulate_dockerfile(_package(tmp_path, files))
    assert found.workdir == "/app" and found.files == {"make.py": b"x=1\n"}


def test_a_failed_build_step_is_named_with_its_host() -> None:
    log = (
        "[1/2] STEP 1/2: FROM localhost/py AS build\n[1/2] STEP 2/2: RUN pip install x\n"
        "WARNING: Retrying ... ConnectionPool(host='pypi.org', port=443)\n"
        "[2/2] STEP 1/2: FROM localhost/py\n[2/2] STEP 2/2: RUN curl -fsSL https://astral.sh/uv\n"
        "curl: (6) Could not resolve host: astral.sh\nError: building at STEP ...\n"
    )
    why = _why(log, "host", Path("/cache/logs/t.log"))
    assert "'RUN curl -fsSL https://astral.sh/uv'" in why
    assert "does not answer from this machine: astral.sh (only" in why


def test_a_near_answer_must_be_closer_than_the_input_it_rewrites(tmp_path: Path) -> None:
    before = "\n".join(f"{n},region_{n % 5},{n * 13.25:.2f}" for n in range(40)).encode()
    answer = "\n".join(  # the solution adds a computed column to every row
        f"{n},region_{n % 5},{n * 13.25:.2f},{n * 13.25 * 1.2:.2f}" for n in range(40)
    ).encode()
    backup = tmp_path / "backup.csv"  # another copy of the input: no leak
    backup.write_bytes(before.replace(b"0,region_0", b"0,region_9"))
    written = ImageFiles({"/var/backups/orders.csv": backup})
    assert near_output(answer, written, "/app/orders.csv", {}, before) is None
    leaked = tmp_path / "report.csv"  # the answer with one value edited: a leak
    leaked.write_bytes(answer.replace(b"15.90", b"15.91"))
    written = ImageFiles({"/var/cache/report.csv": leaked, "/var/backups/orders.csv": backup})
    found = near_output(answer, written, "/app/orders.csv", {}, before)
    assert found is not None and found.where == "/var/cache/report.csv"
    assert found.similarity > 0.95


def test_a_registry_hiccup_is_not_blamed_on_another_host() -> None:
    log = (
        "STEP 1/2: FROM localhost/debian\nSTEP 2/2: RUN apt-get update\n"
        "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  "
        "Temporary failure resolving 'deb.debian.org'\n"
    )
    why = _why(log, "host", Path("/cache/logs/t.log"))
    assert "did not answer this time (deb.debian.org)" in why and "only the" not in why
