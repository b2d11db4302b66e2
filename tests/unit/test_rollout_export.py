"""ATIF exports validate with Harbor's own models and rebuild the record; the Hugging Face
dataset loads with `datasets`, its mask matches the agent messages, and invalid is None."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from harbor.models.trajectories import Trajectory as AtifTrajectory
from harbor.utils.trajectory_validator import TrajectoryValidator

from coworkgym.rollout.export import (
    ExportError,
    atif_dict,
    from_atif,
    hf_schema,
    openai_messages,
    read_atif,
    to_atif,
    write_atif,
    write_hf_dataset,
)
from coworkgym.rollout.trajectory import Trajectory
from tests.fixtures import trajectories as make


def malformed_call_and_copied_context() -> Trajectory:
    """A malformed tool call, an assistant message that is context (not the policy's) and a
    tool result separated from its call by a user message."""
    data = make.solved().model_dump(mode="json")
    data["messages"][2]["tool_calls"][0]["arguments"] = '{"path": '  # cut off mid-JSON
    data["messages"][4]["tool_calls"][0]["arguments"] = '{"code":"print(1)"}'  # compact JSON
    data["messages"].insert(
        1, {"role": "assistant", "source": "system", "content": "Earlier summary (copied)."}
    )
    late = data["messages"].pop(6)  # call_1's result, after a user interjection
    data["messages"].insert(6, {"role": "user", "source": "user", "content": "Use EUR.", "turn": 1})
    data["messages"].insert(7, late)
    return Trajectory.model_validate(data)


def variety() -> list[Trajectory]:
    return make.numbered(
        [
            make.solved(),
            make.solved(with_tokens=False),
            make.verifier_crashed(),
            make.unverified(),
            make.with_simulator_fault(),
            make.with_recovered_tool_error(),
            malformed_call_and_copied_context(),
        ]
    )


# ---- ATIF -------------------------------------------------------------------------------
def test_atif_validates_with_harbors_models_and_validator() -> None:
    for trajectory in variety():
        document = to_atif(trajectory)
        assert isinstance(document, AtifTrajectory)
        validator = TrajectoryValidator()
        assert validator.validate(document.to_json_dict()), validator.get_errors()


def test_atif_maps_tool_results_into_the_calling_step() -> None:
    document = atif_dict(make.solved(steps=3))
    sources = [step["source"] for step in document["steps"]]
    assert sources == ["system", "user", "agent", "agent", "agent", "agent"]
    first_call = document["steps"][2]
    assert first_call["tool_calls"][0]["arguments"] == {"path": make.INPUT}
    assert first_call["observation"]["results"][0]["source_call_id"] == "call_0"
    final = document["steps"][-1]
    assert final["metrics"]["completion_token_ids"] == [101, 102, 103]
    assert document["extra"]["reward"] == 1.0
    assert document["final_metrics"]["total_prompt_tokens"] == 1200


def test_atif_keeps_malformed_arguments_and_marks_context() -> None:
    document = atif_dict(malformed_call_and_copied_context())
    copied = document["steps"][1]
    assert copied["source"] == "agent"
    assert copied["is_copied_context"] is True
    call = document["steps"][3]["tool_calls"][0]
    assert call["arguments"] == {}
    assert call["extra"] == {"raw_arguments": '{"path": ', "malformed": True}
    AtifTrajectory.model_validate(document)


def test_an_invalid_rollout_exports_no_reward() -> None:
    document = atif_dict(make.verifier_crashed())
    assert document["extra"]["reward"] is None
    assert document["extra"]["valid"] is False


def test_atif_round_trip_rebuilds_the_record(tmp_path: Path) -> None:
    trajectories = variety()
    for trajectory in trajectories:
        assert from_atif(to_atif(trajectory).to_json_dict()) == trajectory
    assert write_atif(trajectories, tmp_path / "atif") == len(trajectories)
    files = sorted((tmp_path / "atif").glob("*.json"))
    assert len(files) == len(trajectories)
    for file in files:
        AtifTrajectory.model_validate(json.loads(file.read_text()))
    write_atif(trajectories, tmp_path / "atif.jsonl")
    assert list(read_atif(tmp_path / "atif.jsonl")) == trajectories


def test_atif_folder_export_refuses_to_overwrite_a_shared_id(tmp_path: Path) -> None:
    twins = [make.solved(), make.solved(reward=0.5)]
    with pytest.raises(ExportError, match=r"share the id .* sample 0"):
        write_atif(twins, tmp_path / "atif")


# ---- Hugging Face dataset -------------------------------------------------------------------
def test_hf_dataset_loads_with_datasets_and_the_mask_matches(tmp_path: Path) -> None:
    trajectories = variety()
    path, count = write_hf_dataset(trajectories, tmp_path / "hf")
    assert count == len(trajectories)
    assert path == tmp_path / "hf" / "data" / "train-00000-of-00001.parquet"
    loaded = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert loaded.column_names == hf_schema().names
    assert len(loaded) == len(trajectories)
    for row, trajectory in zip(loaded, trajectories, strict=True):
        assert row["id"] == trajectory.id
        assert row["messages"] == openai_messages(trajectory)
        assert row["trainable"] == [m.source == "agent" for m in trajectory.messages]
        assert len(row["sources"]) == len(row["messages"]) == len(row["completion_token_ids"])
        agent = [i for i, m in enumerate(trajectory.messages) if m.source == "agent"]
        assert [i for i, flag in enumerate(row["trainable"]) if flag] == agent
        assert row["reward"] == trajectory.reward
        assert row["valid"] == (trajectory.reward is not None)


def test_hf_rows_carry_tokens_rewards_and_invalid_reasons(tmp_path: Path) -> None:
    path, _ = write_hf_dataset(variety(), tmp_path / "t.parquet")
    assert path == tmp_path / "t.parquet"
    rows = datasets.load_dataset("parquet", data_files=str(path), split="train")
    solved, untokened, crashed, unverified = rows[0], rows[1], rows[2], rows[3]
    assert solved["completion_token_ids"][-1] == [101, 102, 103]
    assert solved["logprobs"][-1] == [-0.1, -0.2, -0.3]
    assert solved["completion_token_ids"][0] is None  # the system prompt has no tokens
    assert all(ids is None for ids in untokened["completion_token_ids"])
    assert {"name": "totals_match", "score": 1.0} in solved["reward_components"]
    assert crashed["reward"] is None  # invalid is not 0
    assert crashed["invalid_reason"] == "verifier exited 137"
    assert unverified["reward"] is None
    assert "not verified" in unverified["invalid_reason"]
    assert rows[4]["simulator_faults"] == ["private_state_leaked"]
    call = solved["messages"][2]["tool_calls"][0]
    assert call == {
        "id": "call_0",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "{make.INPUT}"}}'},
    }
    assert solved["messages"][0]["tool_calls"] is None


def test_an_empty_export_is_refused_rather_than_unloadable(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no trajectories"):
        write_hf_dataset([], tmp_path / "empty.parquet")
    assert not (tmp_path / "empty.parquet").exists()
