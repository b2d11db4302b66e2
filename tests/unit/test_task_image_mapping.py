"""The FROM mapping onto local bases, the Dockerfile rewrite, and what the leak scan calls
"the same" — pure functions, no buildah needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coworkgym.image.bases import BaseMap, BaseUnavailable, Rule, normalise
from coworkgym.image.dockerfile import UnresolvedBase, bases, rewrite
from coworkgym.image.leaks import ImageFiles, changed_files, meaning


@pytest.mark.parametrize(
    ("ref", "recipe"),
    [
        ("python:3.12-slim", "python:3.12"),
        ("docker.io/library/python:3.11-slim-bookworm", "python:3.11"),
        ("python:3.13.1", "python:3.13"),
        ("python:3.12@sha256:" + "0" * 64, "python:3.12"),
        ("ubuntu:24.04", "debian"),
        ("debian:bookworm-slim", "debian"),
    ],
)
def test_public_bases_map_to_local_recipes(ref: str, recipe: str) -> None:
    assert BaseMap().recipe_for(ref) == recipe


def test_an_unmapped_base_says_how_to_map_it() -> None:
    with pytest.raises(BaseUnavailable, match=r"--base-image node:20=LOCAL"):
        BaseMap().recipe_for("node:20")


def test_overrides_win_and_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COWORKGYM_BASE_IMAGES", "node:*=oci-archive:/srv/node.tar")
    mapping = BaseMap.from_settings(["python:3.12*=localhost/mine/python:3.12"])
    assert mapping.recipe_for("python:3.12-slim") == "localhost/mine/python:3.12"
    assert mapping.recipe_for("node:20-slim") == "oci-archive:/srv/node.tar"


def test_a_malformed_mapping_is_refused_with_the_form() -> None:
    with pytest.raises(ValueError, match="PATTERN=LOCAL"):
        Rule.parse("python:3.12-slim")


def test_normalise_drops_registry_and_digest() -> None:
    assert normalise("docker.io/library/python") == "python:latest"
    assert normalise("ghcr.io/org/tool:1@sha256:ab") == "ghcr.io/org/tool:1"


MULTI_STAGE = """\
ARG PY=3.12
FROM --platform=linux/amd64 python:${PY}-slim AS build
RUN echo build
FROM build AS test
FROM scratch
COPY --from=build /x /x
FROM debian:bookworm   # the runtime
"""


def test_bases_skip_stages_and_scratch_and_substitute_args() -> None:
    assert [b.image for b in bases(MULTI_STAGE)] == ["python:3.12-slim", "debian:bookworm"]


def test_rewrite_replaces_only_external_bases() -> None:
    local = {"python:3.12-slim": "localhost/p:3.12", "debian:bookworm": "localhost/d"}
    out = rewrite(MULTI_STAGE, lambda image: local[image])
    assert "FROM --platform=linux/amd64 localhost/p:3.12 AS build\n" in out
    assert "FROM build AS test\n" in out and "FROM scratch\n" in out
    assert "FROM localhost/d   # the runtime\n" in out


def test_a_base_from_an_argument_without_default_is_unresolved() -> None:
    with pytest.raises(UnresolvedBase, match="BASE"):
        bases("ARG BASE\nFROM ${BASE}\n")


def test_meaning_ignores_json_layout_and_trailing_space() -> None:
    assert meaning(b'{"b": 1.50, "a": [1, 2]}') == meaning(b'{\n  "a": [1, 2],\n  "b": 1.5\n}\n')
    assert meaning(b"x,y\n1,2  \n") == meaning(b"x,y\n1,2\n")
    assert meaning(b"\xff\xfe") is None


def test_changed_files_skip_what_the_base_already_had(tmp_path: Path) -> None:
    base, image = tmp_path / "base", tmp_path / "image"
    for root in (base, image):
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "os-release").write_text("debian\n")
        os.utime(root / "etc" / "os-release", ns=(1, 1))
    (image / "opt").mkdir()
    (image / "opt" / "answer.json").write_text('{"north": 12.5, "south": 3}')
    written = changed_files(image, base)
    assert set(written) == {"/opt/answer.json"}
    same_answer = b'{\n  "south": 3,\n  "north": 12.50\n}'
    assert ImageFiles(written).saying(same_answer) == "/opt/answer.json"
