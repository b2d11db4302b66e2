"""The detector corpus: good packages and deliberately defective ones, each labelled with
the defect code and owner the Issue Detector must raise.

    python -m tests.corpus.build out/corpus     # then: cowork-gym check out/corpus/*/

Defective packages are made by one targeted edit of a good package, so each case isolates
one hole a real generator (or a real Harbor dataset) can have.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from coworkgym.detector.defects import DefectCode
from coworkgym.package.package import EnvironmentPackage, write_tree
from tests.support.builders import good_package

Files = dict[str, bytes]


@dataclass
class RawPackage:
    files: Files
    executables: set[str]
    symlinks: dict[str, str] = field(default_factory=dict)

    def write(self, root: Path) -> Path:
        return write_tree(root, self.files, self.executables, self.symlinks)


def raw(pkg: EnvironmentPackage) -> RawPackage:
    return RawPackage(dict(pkg.files), set(pkg.executables))


# ---- edits ------------------------------------------------------------------------------
def edit_toml(p: RawPackage, change: Callable[[dict[str, object]], None]) -> RawPackage:
    config = tomllib.loads(p.files["task.toml"].decode())
    change(config)
    p.files["task.toml"] = tomli_w.dumps(config).encode()
    return p


def edit_spec(p: RawPackage, change: Callable[[dict[str, object]], None]) -> RawPackage:
    spec = json.loads(p.files["tests/verifier.json"])
    change(spec)
    p.files["tests/verifier.json"] = json.dumps(spec).encode()
    return p


def first_numeric_component(spec: dict[str, object]) -> dict[str, object]:
    components = spec["components"]
    assert isinstance(components, list)
    return next(c for c in components if isinstance(c["check"].get("expected"), int | float))


def reference_output(name: str) -> bytes:
    """A deliverable as the reference solution writes it (grounded by execution)."""
    from tests.support.builders import role_outputs

    built, _ = role_outputs()
    from coworkgym.roles.procedural import ProceduralBuilder

    return ProceduralBuilder().ground(built)[name]


def _set(d: dict[str, object], path: str, value: object) -> None:
    *parents, last = path.split(".")
    node: dict[str, object] = d
    for part in parents:
        child = node[part]
        assert isinstance(child, dict)
        node = child
    node[last] = value


def missing_test_sh(p: RawPackage) -> RawPackage:
    del p.files["tests/test.sh"]
    return p


def typo_in_task_toml(p: RawPackage) -> RawPackage:
    return edit_toml(p, lambda c: _set(c, "agent.timeout_secs", 300))


def stray_top_level_file(p: RawPackage) -> RawPackage:
    p.files["answers.txt"] = b"scratch notes of the generator\n"
    return p


def symlink_out_of_workspace(p: RawPackage) -> RawPackage:
    p.symlinks["environment/workspace/data/link.csv"] = "../../../tests/inputs/data/weather.csv"
    return p


def reference_output_in_s0(p: RawPackage) -> RawPackage:
    p.files["environment/workspace/summary.json"] = reference_output("summary.json")
    return p


def expected_value_in_instruction(p: RawPackage) -> RawPackage:
    spec = json.loads(p.files["tests/verifier.json"])
    total = next(c for c in spec["components"] if c["id"] == "total_precipitation")
    hint = f"\n(For reference, the total should come out at {total['check']['expected']:.2f} mm.)\n"
    p.files["instruction.md"] += hint.encode()
    return p


def dockerfile_copies_tests(p: RawPackage) -> RawPackage:
    p.files["environment/Dockerfile"] += b"COPY tests/ /app/.tests/\n"
    return p


def latent_goal_in_instruction(p: RawPackage) -> RawPackage:
    user = json.loads(p.files[".user/user.json"])
    p.files["instruction.md"] += ("\nNote: " + user["latent_goals"][0] + "\n").encode()
    return p


def too_few_components(p: RawPackage) -> RawPackage:
    return edit_spec(p, lambda s: s.update(components=s["components"][:2]))  # type: ignore[index]


def no_red_line(p: RawPackage) -> RawPackage:
    return edit_spec(p, lambda s: s.update(red_lines=[]))


def permissive_tolerance(p: RawPackage) -> RawPackage:
    return edit_spec(p, lambda s: first_numeric_component(s)["check"].update(rel_tolerance=0.9))  # type: ignore[attr-defined]


def shared_verifier(p: RawPackage) -> RawPackage:
    def change(c: dict[str, object]) -> None:
        verifier = c["verifier"]
        assert isinstance(verifier, dict)
        verifier["environment_mode"] = "shared"

    return edit_toml(p, change)


def wrong_expected_value(p: RawPackage) -> RawPackage:
    def change(s: dict[str, object]) -> None:
        check = next(c for c in s["components"] if c["id"] == "total_precipitation")["check"]  # type: ignore[attr-defined]
        check["expected"] = check["expected"] + 25.0

    return edit_spec(p, change)


def broken_solution(p: RawPackage) -> RawPackage:
    p.files["solution/solve.sh"] = b"#!/usr/bin/env bash\necho 'not implemented' >&2\nexit 1\n"
    return p


def verifier_input_missing(p: RawPackage) -> RawPackage:
    for rel in [r for r in p.files if r.startswith("tests/inputs/")]:
        del p.files[rel]
    return p


def format_only_verifier(p: RawPackage) -> RawPackage:
    """Checks shape, never values: wrong numbers pass."""

    def change(s: dict[str, object]) -> None:
        s["components"] = [
            {
                "id": "has_report",
                "weight": 1,
                "check": {"type": "file_exists", "path": "report.xlsx"},
            },
            {
                "id": "columns",
                "weight": 1,
                "check": {
                    "type": "table_columns",
                    "path": "report.xlsx",
                    "sheet": "Summary",
                    "columns": ["month", "total_precip_mm"],
                },
            },
            {
                "id": "summary_shape",
                "weight": 1,
                "check": {
                    "type": "json_schema",
                    "path": "summary.json",
                    "schema": {"type": "object", "required": ["wettest_month", "total_precip_mm"]},
                },
            },
            {
                "id": "months",
                "weight": 1,
                "check": {"type": "row_count", "path": "report.xlsx", "min": 2},
            },
        ]

    return edit_spec(p, change)


def ungated_verifier(p: RawPackage) -> RawPackage:
    """The family's checks with no gates: a stale or half-delivered workspace keeps the
    weighted share of what it got right (more than 0.5 here)."""

    def change(s: dict[str, object]) -> None:
        components = s["components"]
        assert isinstance(components, list)
        for component in components:
            component["gate"] = False

    return edit_spec(p, change)


def patch_edits_an_output(p: RawPackage) -> RawPackage:
    patch = json.loads(p.files[".patch/turn-01/patch.json"])
    patch["updates"].append({"op": "write", "path": "report.xlsx", "source": "weather.csv"})
    p.files[".patch/turn-01/patch.json"] = json.dumps(patch).encode()
    return p


def patch_without_news(p: RawPackage) -> RawPackage:
    patch = json.loads(p.files[".patch/turn-01/patch.json"])
    for update in patch["updates"]:
        p.files[f".patch/turn-01/files/{update['source']}"] = p.files[
            f"environment/workspace/{update['path']}"
        ]
    p.files[".patch/turn-01/patch.json"] = json.dumps(patch).encode()
    return p


def untouched_passes(p: RawPackage) -> RawPackage:
    """Only looks at the input data, which is there from the start."""

    def change(s: dict[str, object]) -> None:
        s["components"] = [
            {
                "id": f"data_{i}",
                "weight": 1,
                "check": {"type": "text_regex", "path": "data/weather.csv", "pattern": pattern},
            }
            for i, pattern in enumerate(["^date,", "rain", "sun"])
        ]

    return edit_spec(p, change)


def labels_of_another_task(p: RawPackage) -> RawPackage:
    """A weather report labelled as clinic billing-code file management (issue 14)."""

    def change(c: dict[str, object]) -> None:
        _set(c, "metadata.cowork.taxonomy.scenario", "healthcare/records/billing_codes")
        _set(c, "metadata.cowork.taxonomy.capabilities", ["file_management"])
        _set(c, "metadata.cowork.taxonomy.user_role", "clinic_coordinator")

    return edit_toml(p, change)


def tie_left_open(p: RawPackage) -> RawPackage:
    """The wind turn without its tie rule, on data where two months tie (issue 14)."""
    patch = json.loads(p.files[".patch/turn-01/patch.json"])
    assert patch["kind"] == "requirement_changed" and "windiest_month" in patch["message"]
    patch["message"] = patch["message"].replace(" (the earliest such month if months tie)", "")
    p.files[".patch/turn-01/patch.json"] = json.dumps(patch).encode()
    return p


# ---- plain Harbor tasks (no Cowork extensions) -------------------------------------------
HELLO_TOML = """\
schema_version = "1.4"
artifacts = ["/app/hello.txt"]

[task]
name = "corpus/hello"
description = "Shout the greeting."

[agent]
timeout_sec = 120.0
user = "agent"

[verifier]
timeout_sec = 60.0
environment_mode = "separate"

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
network_mode = "no-network"
"""
HELLO_TEST = """\
#!/usr/bin/env bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "HELLO, WORLD" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def plain_harbor_task() -> RawPackage:
    files = {
        "task.toml": HELLO_TOML.encode(),
        "instruction.md": b"Write greeting.txt in upper case to /app/hello.txt.\n",
        "environment/Dockerfile": b"FROM debian:bookworm-20250520-slim\nWORKDIR /app\n"
        b"COPY greeting.txt /app/greeting.txt\n",
        "environment/greeting.txt": b"Hello, world\n",
        "solution/solve.sh": b"#!/usr/bin/env bash\ntr a-z A-Z < /app/greeting.txt "
        b"| tr -d '\\n' > /app/hello.txt\n",
        "tests/test.sh": HELLO_TEST.encode(),
    }
    return RawPackage(files, {"solution/solve.sh", "tests/test.sh"})


def harbor_forgeable(p: RawPackage) -> RawPackage:
    """Shared verifier and a test that rewards anything: both holes the audit must show."""
    p.files["task.toml"] = p.files["task.toml"].replace(b'environment_mode = "separate"', b"")
    p.files["tests/test.sh"] = (
        b"#!/usr/bin/env bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"
    )
    return p


def harbor_solution_in_environment(p: RawPackage) -> RawPackage:
    p.files["environment/hello.txt"] = b"HELLO, WORLD"
    p.files["environment/Dockerfile"] += b"COPY hello.txt /app/hello.txt\n"
    return p


# ---- the corpus -------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], RawPackage]
    code: DefectCode | None = None  # None: a good package
    owner: str | None = None


def cowork(turns: int = 1, seed: int = 7) -> Callable[[], RawPackage]:
    return lambda: raw(good_package(turns=turns, seed=seed))


def defective(edit: Callable[[RawPackage], RawPackage], turns: int = 1) -> Callable[[], RawPackage]:
    return lambda: edit(raw(good_package(turns=turns)))


C = DefectCode
CASES: list[Case] = [
    Case("good-weather-single", cowork(1)),
    Case("good-weather-two-turns", cowork(2, seed=11)),
    Case("good-weather-three-turns", cowork(3, seed=5)),
    Case("good-harbor-hello", plain_harbor_task),
    Case("missing-test-sh", defective(missing_test_sh), C.PACKAGE_STRUCTURE, "builder"),
    Case("typo-in-task-toml", defective(typo_in_task_toml), C.PACKAGE_INVALID, "builder"),
    Case("stray-top-level-file", defective(stray_top_level_file), C.FILE_NOT_ALLOWED, "builder"),
    Case("symlink-escape", defective(symlink_out_of_workspace), C.PATH_ESCAPE, "builder"),
    Case(
        "reference-output-in-s0",
        defective(reference_output_in_s0),
        C.LEAK_REFERENCE_OUTPUT,
        "builder",
    ),
    Case(
        "expected-value-in-instruction",
        defective(expected_value_in_instruction),
        C.LEAK_EXPECTED_VALUE,
        "builder",
    ),
    Case(
        "dockerfile-copies-tests",
        defective(dockerfile_copies_tests),
        C.LEAK_VERIFIER_CONTENT,
        "builder",
    ),
    Case(
        "latent-goal-in-instruction",
        defective(latent_goal_in_instruction),
        C.LEAK_USER_STATE,
        "builder",
    ),
    Case("broken-solution", defective(broken_solution), C.SOLUTION_FAILED, "builder"),
    Case(
        "patch-edits-an-output",
        defective(patch_edits_an_output, turns=2),
        C.PATCH_UNAUTHORIZED,
        "builder",
    ),
    Case(
        "patch-without-news",
        defective(patch_without_news, turns=2),
        C.PATCH_NO_NEW_INFORMATION,
        "builder",
    ),
    Case(
        "too-few-components",
        defective(too_few_components),
        C.VERIFIER_TOO_FEW_COMPONENTS,
        "verifier",
    ),
    Case("no-red-line", defective(no_red_line), C.VERIFIER_NO_RED_LINE, "verifier"),
    Case(
        "no-red-line-damaged-inputs", defective(no_red_line), C.ACCEPTS_DAMAGED_INPUTS, "verifier"
    ),
    Case(
        "permissive-tolerance",
        defective(permissive_tolerance),
        C.VERIFIER_PERMISSIVE_CHECK,
        "verifier",
    ),
    Case("shared-verifier", defective(shared_verifier), C.VERIFIER_SHARED_MODE, "verifier"),
    Case("wrong-expected-value", defective(wrong_expected_value), C.REFERENCE_REJECTED, "verifier"),
    Case(
        "verifier-input-missing", defective(verifier_input_missing), C.VERIFIER_INVALID, "verifier"
    ),
    Case(
        "format-only-verifier",
        defective(format_only_verifier),
        C.ACCEPTS_CORRUPTED_ARTIFACT,
        "verifier",
    ),
    Case(
        "format-only-verifier-stale",
        defective(format_only_verifier, turns=2),
        C.ACCEPTS_STALE_RESULT,
        "verifier",
    ),
    Case("untouched-passes", defective(untouched_passes), C.ACCEPTS_UNTOUCHED, "verifier"),
    Case(
        "verifier-pays-stale-work",
        defective(ungated_verifier, turns=3),
        C.PARTIAL_CREDIT_STALE,
        "verifier",
    ),
    Case(
        "verifier-pays-missing-deliverable",
        defective(ungated_verifier),
        C.PARTIAL_CREDIT_MISSING,
        "verifier",
    ),
    Case("labels-of-another-task", defective(labels_of_another_task), C.LABELS_MISMATCH, "builder"),
    Case(  # seed 4, easy, two turns: May and June 2012 tie at the highest wind, 6.4
        "tie-left-open",
        lambda: tie_left_open(raw(good_package(turns=2, seed=4, difficulty="easy"))),
        C.ANSWER_AMBIGUOUS,
        "builder",
    ),
    Case(
        "harbor-forgeable-reward",
        lambda: harbor_forgeable(plain_harbor_task()),
        C.VERIFIER_SHARED_MODE,
        "verifier",
    ),
    Case(
        "harbor-noop-passes",
        lambda: harbor_forgeable(plain_harbor_task()),
        C.ACCEPTS_UNTOUCHED,
        "verifier",
    ),
    Case(
        "harbor-solution-in-environment",
        lambda: harbor_solution_in_environment(plain_harbor_task()),
        C.ACCEPTS_UNTOUCHED,
        "verifier",
    ),
]


def build(root: Path) -> list[tuple[Case, Path]]:
    return [(case, case.make().write(root / case.name)) for case in CASES]


if __name__ == "__main__":
    from coworkgym.logs import configure_logging

    configure_logging()
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "out/corpus")
    for case, path in build(target):
        label = f"{case.code} ({case.owner})" if case.code else "good"
        print(f"{path}\t{label}")
