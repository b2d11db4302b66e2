"""The instruction and the verifier agree (issue 25: code_review defined an API mismatch
as breaking callers "in files the change does not touch" while the only caller sat in a
file the change touches, and the verifier expected it flagged).

Every family's instruction, at every difficulty, with its later turns: each file it names
exists in s0, is a declared input or output, or arrives with a later turn; each declared
output is named; and for code_review the defect kinds the verifier expects are the kinds
the instruction defines, an API mismatch's callers included."""

from __future__ import annotations

import json
import re

import pytest

from coworkgym.families import FAMILIES
from coworkgym.families.base import FamilyDraft, FamilyParams
from tests.support.builders import good_package

FILE_TOKEN = re.compile(r"(?<!e\.g\. )`([^`\s<>*]+\.[a-z]{2,5}|[^`\s<>*]+/)`")
DIFFICULTIES = ("easy", "medium", "hard")
FIELD_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


def _draft(family: str, difficulty: str) -> FamilyDraft:
    params = FamilyParams(seed=3, difficulty=difficulty, turns=3)  # type: ignore[arg-type]
    return FAMILIES[family].draft(params)


def _known_paths(draft: FamilyDraft) -> set[str]:
    files = set(draft.workspace) | {a.path for a in [*draft.inputs, *draft.outputs]}
    files |= {u.path for t in draft.turns for u in t.patch.updates}
    folders = {p.rsplit("/", i)[0] + "/" for p in files for i in range(1, p.count("/") + 1)}
    return files | folders


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_file_the_text_names_is_in_the_package(family: str, difficulty: str) -> None:
    draft = _draft(family, difficulty)
    known = _known_paths(draft)
    texts = [draft.instruction, *(t.patch.message for t in draft.turns)]
    unknown = {
        name
        for text in texts
        for name in FILE_TOKEN.findall(text)
        # a name relative to a folder the text names (the diff's paths, a turn's inbox/)
        if name not in known and not any(k.endswith(f"/{name}") for k in known)
    }
    assert unknown == set()
    unnamed = [
        a.path
        for a in draft.outputs
        if a.path not in draft.instruction and a.path.rsplit("/", 1)[-1] not in draft.instruction
    ]
    assert unnamed == []


def _defined_kinds(instruction: str) -> dict[str, str]:
    """code_review's kinds as the instruction defines them: kind → definition."""
    return dict(re.findall(r"^\s*- `(\w+)`: (.+?)(?=\n\s*- `|\n\s*Flag)", instruction, re.M | re.S))


def test_code_review_defines_each_kind_the_verifier_expects_as_it_expects_it() -> None:
    pkg = good_package("code_review", turns=1, seed=3, difficulty="hard")
    expected = json.loads(pkg.files["tests/expected_review.json"])["findings"]
    defined = _defined_kinds(pkg.instruction)
    assert {f["kind"] for f in expected} <= set(defined)
    workspace = pkg.workspace()
    patch = workspace["change.patch"].decode()
    touched = set(re.findall(r"^\+\+\+ b/(\S+)", patch, re.M))
    for finding in (f for f in expected if f["kind"] == "api_mismatch"):
        changed = _changed_function(patch, finding["line"], finding["file"])
        callers = {
            rel.removeprefix("repo/")
            for rel, data in workspace.items()
            if rel.startswith("repo/")
            and rel.endswith(".py")
            and re.search(rf"(?<!def ){changed}\(", data.decode())
        }
        assert callers, f"no caller of {changed} for the expected api_mismatch"
        if callers & touched:  # the definition must cover a caller in a touched file
            assert "does not touch" not in " ".join(defined["api_mismatch"].split())


def _changed_function(patch: str, line: int, file: str) -> str:
    """The function defined on the added line the verifier expects flagged."""
    added: dict[tuple[str, int], str] = {}
    current, number = "", 0
    for text in patch.splitlines():
        if text.startswith("+++ b/"):
            current = text.removeprefix("+++ b/")
        elif hunk := re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", text):
            number = int(hunk.group(1))
        elif text.startswith(("+", " ")) and not text.startswith("+++"):
            added[(current, number)] = text[1:]
            number += 1
    defined = re.match(r"def (\w+)\(", added.get((file.removeprefix("repo/"), line), ""))
    assert defined, f"{file}:{line} is no added def line"
    return defined.group(1)


def _paths_and_fields(check: object) -> tuple[set[str], set[str]]:
    """The workspace files a check reads and the JSON fields / columns it names."""
    paths: set[str] = set()
    fields: set[str] = set()
    if isinstance(check, dict):
        for key, value in check.items():
            if key == "path" and isinstance(value, str) and not value.startswith("inputs/"):
                paths.add(value)
            elif key == "pointer" and isinstance(value, str):
                # the top-level field is the deliverable's schema; below it keys may be
                # data (a sector, a month, a message id)
                top = value.split("/")[1] if value.count("/") else ""
                fields |= {top} if FIELD_NAME.fullmatch(top) else set()
            elif key in ("value_column", "column", "key_column") and isinstance(value, str):
                fields.add(value)
            elif key != "source":  # a source reads the verifier's private inputs
                more = _paths_and_fields(value)
                paths, fields = paths | more[0], fields | more[1]
    elif isinstance(check, list):
        for item in check:
            more = _paths_and_fields(item)
            paths, fields = paths | more[0], fields | more[1]
    return paths, fields


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_verifier_reads_the_deliverables_and_fields_the_text_names(family: str) -> None:
    pkg = good_package(family, turns=3, seed=3, difficulty="hard")
    assert pkg.verifier is not None and pkg.artifacts is not None
    declared = {a.path for a in pkg.artifacts.artifacts}
    text = " ".join([pkg.instruction, *(p.message for p in pkg.patches)])
    for component in pkg.verifier.components:
        paths, fields = _paths_and_fields(component.check.model_dump(mode="json"))
        assert paths <= declared, (component.id, paths - declared)
        assert {f for f in fields if f not in text} == set(), component.id
