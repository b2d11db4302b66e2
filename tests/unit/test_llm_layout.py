"""How LLM roles hand over outputs (the directory layouts), what their prompts promise,
how their settings are read, and that the scripted fixtures match their author script."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from coworkgym.detector.defects import Defect, DefectCode
from coworkgym.llm import prompts
from coworkgym.llm.layout import (
    LayoutError,
    export_builder,
    export_verifier,
    load_builder,
    load_verifier,
)
from coworkgym.llm.settings import NO_KEY, LLMSettings, take_api_key
from coworkgym.roles.base import RoleRequest
from coworkgym.roles.llm import configure_llm_backends, llm_settings, role_backends, untouched
from coworkgym.runtime.local import LocalRuntime
from coworkgym.spec import RoleBackend
from coworkgym.verifier.spec import CHECK_TYPES
from tests.fixtures.llm import make_fixtures
from tests.support.builders import environment_spec, role_outputs


# ---- layouts ----------------------------------------------------------------------------
def test_a_builder_output_survives_its_layout(tmp_path: Path) -> None:
    built, _ = role_outputs(turns=3)
    export_builder(built, tmp_path)
    loaded = load_builder(tmp_path, environment_spec(turns=3), iteration=1)
    assert loaded.name == built.name and loaded.description == built.description
    assert loaded.instruction == built.instruction and loaded.solve_sh == built.solve_sh
    assert loaded.workspace == built.workspace
    assert (loaded.user, loaded.interfaces, loaded.artifacts) == (
        built.user,
        built.interfaces,
        built.artifacts,
    )
    assert [(t.patch, t.files) for t in loaded.turns] == [(t.patch, t.files) for t in built.turns]
    assert loaded.cowork.family == "llm" and loaded.cowork.iterations == 2


def test_the_verifier_constructors_view_adds_the_reference_and_final_inputs(
    tmp_path: Path,
) -> None:
    built, _ = role_outputs(turns=2)
    export_builder(built, tmp_path, reference={"report.xlsx": b"grounded"})
    assert (tmp_path / "reference/report.xlsx").read_bytes() == b"grounded"
    for rel, data in built.final_inputs().items():
        assert (tmp_path / "final_inputs" / rel).read_bytes() == data


def problems_of(root: Path, turns: int = 1) -> str:
    with pytest.raises(LayoutError) as caught:
        load_builder(root, environment_spec(turns=turns), iteration=0)
    return "\n".join(caught.value.problems)


def test_an_empty_build_lists_everything_missing(tmp_path: Path) -> None:
    found = problems_of(tmp_path)
    for expected in (
        "task.json: missing",
        "user.json: missing",
        "artifacts.json: missing",
        "instruction.md: missing or empty",
        "solve.sh: missing or empty",
        "workspace/: empty",
    ):
        assert expected in found


def test_invalid_files_are_reported_by_file_and_field(tmp_path: Path) -> None:
    built, _ = role_outputs(turns=2)
    export_builder(built, tmp_path)
    (tmp_path / "task.json").write_text('{"slug": "Bad Slug!", "title": "ok title"}')
    (tmp_path / "user.json").write_text("{not json")
    (tmp_path / "workspace/data/weather.csv").unlink()
    (tmp_path / "workspace/linked.csv").symlink_to("/etc/passwd")
    found = problems_of(tmp_path, turns=3)
    assert "task.json: slug: String should match pattern" in found
    assert "user.json: not valid JSON" in found
    assert "artifacts.json: input data/weather.csv is not in workspace/" in found
    assert "workspace/linked.csv: is a symlink" in found
    assert "patches/: 1 later user turn(s), but the spec asks for 3 turn(s)" in found


def test_patch_folders_must_be_numbered_and_complete(tmp_path: Path) -> None:
    built, _ = role_outputs(turns=2)
    export_builder(built, tmp_path)
    (tmp_path / "patches/turn-01").rename(tmp_path / "patches/turn-02")
    assert "turn: is 1 but the folder is turn-02" in problems_of(tmp_path, turns=2)


def test_a_verifier_output_survives_its_layout_and_reserved_names_are_refused(
    tmp_path: Path,
) -> None:
    _, made = role_outputs()
    export_verifier(made, tmp_path / "ok")
    loaded = load_verifier(tmp_path / "ok")
    assert loaded.spec == made.spec and loaded.private_files == made.private_files
    (tmp_path / "ok/test.sh").write_text("echo 1")
    (tmp_path / "ok/verifier.json").write_text('{"components": []}')
    with pytest.raises(LayoutError) as caught:
        load_verifier(tmp_path / "ok")
    found = "\n".join(caught.value.problems)
    assert "test.sh: reserved" in found
    assert "verifier.json: components: List should have at least 1 item" in found


def test_untouched_is_s0_after_every_user_patch() -> None:
    built, _ = role_outputs(turns=2)
    state = untouched(built)
    assert set(state) == set(built.workspace)
    for rel, data in built.final_inputs().items():
        assert state[rel] == data


# ---- prompts ----------------------------------------------------------------------------
def test_the_verifier_prompt_documents_every_check_type() -> None:
    system = prompts.verifier_system()
    missing = [t for t in CHECK_TYPES if f"- {t} " not in system and f"; {t} " not in system]
    assert missing == []


def test_the_review_prompt_lists_every_defect_code_with_its_owner() -> None:
    system = prompts.review_system()
    for code in DefectCode:
        assert f"- {code}: (" in system


def test_role_prompts_start_with_their_role() -> None:
    # the scripted test server (and any log reader) tells the roles apart by this line
    assert prompts.builder_system().startswith("# Role: Builder\n")
    assert prompts.verifier_system().startswith("# Role: Verifier Constructor\n")
    assert prompts.review_system().startswith("# Role: Issue Detector (review)\n")


def test_a_revision_task_carries_the_routed_defects_with_evidence() -> None:
    spec = environment_spec(turns=2)
    defect = Defect.of(DefectCode.LEAK_USER_STATE, "private goal in instruction.md", file="x")
    first = prompts.builder_task(spec, [], revising=False)
    again = prompts.builder_task(spec, [defect], revising=True)
    assert "revision" not in first
    assert "user turns in all: 2 (so 1 folder(s) under patches/)" in first
    assert "This is a revision. /build holds your previous output." in again
    assert 'LEAK_USER_STATE (error): private goal in instruction.md\n  evidence: {"file": "x"}' in (
        again
    )
    nothing = prompts.verifier_task(spec, [], revising=True)
    assert "no defects were routed to you" in nothing


# ---- settings and backend choice --------------------------------------------------------
def test_the_api_key_is_taken_out_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = LLMSettings(model="m", base_url="http://127.0.0.1:1/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("COWORKGYM_LLM_API_KEY", "sk-first")
    assert settings.api_key() == "sk-first"
    assert take_api_key(settings) == "sk-first"
    assert "COWORKGYM_LLM_API_KEY" not in os.environ  # no child process inherits it
    assert take_api_key(settings) == "sk-first"  # kept in this process's memory
    monkeypatch.setenv("COWORKGYM_LLM_API_KEY", "sk-rotated")
    assert take_api_key(settings) == "sk-rotated"
    named = LLMSettings(model="m", base_url="u", api_key_env="MY_PROVIDER_KEY")
    assert named.api_key({"MY_PROVIDER_KEY": "k", "OPENAI_API_KEY": "other"}) == "k"
    assert named.api_key({}) == NO_KEY


def test_llm_backends_from_the_command_line_options() -> None:
    spec = environment_spec()
    configure_llm_backends(
        spec,
        base_url="http://gpu:8000/v1",
        model="qwen",
        roles={"verifier": {"model": "bigger", "base_url": None}},
    )
    settings = llm_settings(spec)
    assert set(settings) == {"builder", "verifier"}
    assert (settings["builder"].model, settings["builder"].base_url) == (
        "qwen",
        "http://gpu:8000/v1",
    )
    assert settings["verifier"].model == "bigger"
    configure_llm_backends(spec, base_url="http://gpu:8000/v1", model="qwen", review=True)
    assert set(llm_settings(spec)) == {"builder", "verifier", "detector"}
    with pytest.raises(ValidationError, match="needs 'model' and 'baseUrl'"):
        configure_llm_backends(environment_spec(), base_url=None, model="qwen")
    with pytest.raises(ValueError, match="needs 'model' and 'baseUrl'"):
        LLMSettings.from_backend(RoleBackend())


def test_procedural_specs_start_no_gateway_and_report_their_injected_faults() -> None:
    spec = environment_spec(faultInjection={"probability": 1.0, "kinds": ["leak"]})
    with role_backends("env", spec, LocalRuntime()) as roles:
        assert roles.session is None
        assert type(roles.builder).__name__ == "ProceduralBuilder"
        roles.builder.build(RoleRequest("env", spec, 0), None)
        assert roles.injected("env") == ["leak"]


# ---- fixtures ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(make_fixtures.FIXTURES))
def test_the_committed_fixtures_match_their_author_script(name: str) -> None:
    committed = (make_fixtures.HERE / f"{name}.json").read_text()
    assert committed == make_fixtures.render(name), "run python -m tests.fixtures.llm.make_fixtures"
    assert json.loads(committed)["lanes"]
