"""Exports of trajectory records: Harbor's ATIF, and a Hugging Face dataset (parquet).

**ATIF** (Agent Trajectory Interchange Format, Harbor's ``trajectory.json``) is built and
validated with Harbor's own pydantic models (``harbor.models.trajectories``), so what we
write is what Harbor reads. Mapping, one message to one step:

- system / user messages → ``system`` / ``user`` steps; assistant messages → ``agent``
  steps with their tool calls, and the tool results that answer them become that step's
  ``observation`` (ATIF has no tool steps). An assistant message that is not
  agent-generated is marked ``is_copied_context`` (ATIF's "do not train on this").
- the policy's token ids and logprobs → the step's ``metrics``;
- tool-call arguments that are not a JSON object (a malformed call) → ``arguments: {}``
  with the raw text in the call's ``extra``;
- everything else of the record (key, environment, verification, user interventions,
  workspace events, simulator faults, workspaces, timings) → the root ``extra.cowork_gym``,
  so ``from_atif`` rebuilds the record exactly.

**Hugging Face dataset**: one parquet row per trajectory with OpenAI-style chat
``messages`` and a ``trainable`` mask aligned with them; the columns are in
``hf_schema()`` and documented in ``docs/trajectories.md``. ``datasets`` loads it with
``load_dataset("parquet", data_files=...)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from .. import __version__
from .trajectory import Message, ToolCall, Trajectory

# ATIF-v1.7 is the first version with the fields we use (tool-call and result ``extra``,
# ``trajectory_id``); newer readers accept it.
ATIF_VERSION = "ATIF-v1.7"
COWORK_KEY = "cowork_gym"
PARQUET_BATCH_ROWS = 512


class ExportError(RuntimeError):
    """An export cannot be written (a missing optional dependency, a foreign file)."""


# ---- OpenAI-style chat messages -------------------------------------------------------------
def openai_message(message: Message) -> dict[str, Any]:
    """A message as OpenAI's chat API spells it (every key present, for a fixed schema)."""
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in message.tool_calls
    ]
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": calls or None,
        "tool_call_id": message.tool_call_id,
    }


def openai_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    return [openai_message(m) for m in trajectory.messages]


# ---- ATIF -----------------------------------------------------------------------------------
def _harbor_trajectory_model() -> Any:
    try:
        from harbor.models.trajectories import Trajectory as AtifTrajectory
    except ImportError as exc:
        raise ExportError(
            "ATIF export validates with Harbor's models: pip install 'cowork-gym[harbor]'"
        ) from exc
    return AtifTrajectory


def _atif_call(call: ToolCall) -> dict[str, Any]:
    try:
        parsed = json.loads(call.arguments)
    except json.JSONDecodeError:
        parsed = None
    out: dict[str, Any] = {"tool_call_id": call.id, "function_name": call.name}
    if isinstance(parsed, dict):
        out["arguments"] = parsed
        if json.dumps(parsed) != call.arguments:  # keep the exact text the model produced
            out["extra"] = {"raw_arguments": call.arguments}
    else:
        out["arguments"] = {}
        out["extra"] = {"raw_arguments": call.arguments, "malformed": True}
    return out


def _message_extra(message: Message, index: int) -> dict[str, Any]:
    return {
        COWORK_KEY: {
            "index": index,
            "role": message.role,
            "source": message.source,
            "turn": message.turn,
            "elapsed_s": message.elapsed_s,
        }
    }


def _result(message: Message, index: int, source_call_id: str | None) -> dict[str, Any]:
    extra = _message_extra(message, index)
    extra[COWORK_KEY].update(is_error=message.is_error, tool_call_id=message.tool_call_id)
    return {"source_call_id": source_call_id, "content": message.content, "extra": extra}


def _step(trajectory: Trajectory, message: Message, index: int) -> dict[str, Any]:
    when = trajectory.timings.started_at + timedelta(seconds=message.elapsed_s)
    step: dict[str, Any] = {
        "source": "agent" if message.role == "assistant" else message.role,
        "timestamp": when.isoformat(),
        "message": message.content,
        "extra": _message_extra(message, index),
    }
    if message.role != "assistant":
        return step
    if message.tool_calls:
        step["tool_calls"] = [_atif_call(c) for c in message.tool_calls]
    if not message.trainable:
        step["is_copied_context"] = True
    if message.tokens is not None:
        step["metrics"] = {
            "completion_token_ids": message.tokens.completion_ids,
            "logprobs": message.tokens.logprobs,
            "prompt_token_ids": message.tokens.prompt_ids,
        }
    return step


def atif_dict(trajectory: Trajectory) -> dict[str, Any]:
    """The ATIF document for one trajectory, as plain JSON data (not yet validated)."""
    steps: list[dict[str, Any]] = []
    open_calls: set[str] = set()  # calls of the agent step that tool results may still answer
    for index, message in enumerate(trajectory.messages):
        if message.role == "tool":
            call_id = message.tool_call_id
            if call_id in open_calls:
                steps[-1].setdefault("observation", {"results": []})["results"].append(
                    _result(message, index, call_id)
                )
                continue
            # A result with no call just before it: a step of its own, so order survives.
            steps.append(
                {
                    "source": "system",
                    "message": "",
                    "observation": {"results": [_result(message, index, None)]},
                    "extra": {COWORK_KEY: {"kind": "tool_results"}},
                }
            )
            open_calls = set()
            continue
        steps.append(_step(trajectory, message, index))
        open_calls = {c.id for c in message.tool_calls}
    if not steps:  # ATIF needs one step; an empty episode says so
        steps.append({"source": "system", "message": "", "extra": {COWORK_KEY: {"kind": "empty"}}})
    for number, step in enumerate(steps, start=1):
        step["step_id"] = number
    usage = trajectory.usage
    return {
        "schema_version": ATIF_VERSION,
        "session_id": trajectory.id,
        "trajectory_id": trajectory.id,
        "agent": {
            "name": trajectory.policy.harness,
            "version": f"cowork-gym {__version__}",
            "model_name": trajectory.policy.model,
            "extra": {"base_url": trajectory.policy.base_url, **trajectory.policy.sampling},
        },
        "steps": steps,
        "notes": (
            f"Exported by cowork-gym from {trajectory.schema_version}; extra.{COWORK_KEY} holds "
            "the rest of the record (verification, user interventions, workspace events)."
        ),
        "final_metrics": {
            "total_prompt_tokens": usage.prompt_tokens,
            "total_completion_tokens": usage.completion_tokens,
            "total_steps": len(steps),
            "extra": usage.model_dump(exclude={"prompt_tokens", "completion_tokens"}),
        },
        "extra": {
            "reward": trajectory.reward,
            "valid": trajectory.verification is not None and trajectory.verification.valid,
            COWORK_KEY: trajectory.model_dump(mode="json", exclude={"messages"}),
        },
    }


def to_atif(trajectory: Trajectory) -> Any:
    """The trajectory as a validated ``harbor.models.trajectories.Trajectory``."""
    return _harbor_trajectory_model().model_validate(atif_dict(trajectory))


def _message_from(content: Any, info: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "role": info["role"],
        "source": info["source"],
        "content": content if isinstance(content, str) else "",
        "turn": info["turn"],
        "elapsed_s": info["elapsed_s"],
        **fields,
    }


def from_atif(document: dict[str, Any]) -> Trajectory:
    """Rebuild the trajectory record from an ATIF document that ``to_atif`` wrote."""
    record = (document.get("extra") or {}).get(COWORK_KEY)
    if not isinstance(record, dict):
        raise ExportError(f"not a cowork-gym ATIF export: no extra.{COWORK_KEY} at the root")
    messages: list[dict[str, Any]] = []
    for step in document["steps"]:
        info = (step.get("extra") or {}).get(COWORK_KEY, {})
        if "role" in info:
            fields: dict[str, Any] = {}
            if step.get("tool_calls"):
                fields["tool_calls"] = [
                    {
                        "id": c["tool_call_id"],
                        "name": c["function_name"],
                        "arguments": (c.get("extra") or {}).get("raw_arguments")
                        or json.dumps(c["arguments"]),
                    }
                    for c in step["tool_calls"]
                ]
            metrics = step.get("metrics") or {}
            if metrics.get("completion_token_ids") is not None:
                fields["tokens"] = {
                    "completion_ids": metrics["completion_token_ids"],
                    "logprobs": metrics.get("logprobs"),
                    "prompt_ids": metrics.get("prompt_token_ids"),
                }
            messages.append(_message_from(step["message"], info, **fields))
        for result in (step.get("observation") or {}).get("results", []):
            meta = result["extra"][COWORK_KEY]
            messages.append(
                _message_from(
                    result.get("content"),
                    meta,
                    tool_call_id=meta["tool_call_id"],
                    is_error=meta["is_error"],
                )
            )
    return Trajectory.model_validate({**record, "messages": messages})


def write_atif(trajectories: Iterable[Trajectory], out: Path) -> int:
    """ATIF documents: one ``<id>.json`` per trajectory in the folder ``out``, or one per
    line when ``out`` ends in ``.jsonl``. Each is validated with Harbor's models first."""
    model = _harbor_trajectory_model()
    count = 0
    if out.suffix == ".jsonl":
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as handle:
            for trajectory in trajectories:
                document = model.model_validate(atif_dict(trajectory)).to_json_dict()
                handle.write(json.dumps(document) + "\n")
                count += 1
        return count
    out.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    for trajectory in trajectories:
        if trajectory.id in written:
            key = trajectory.key
            raise ExportError(
                f"two trajectories share the id {trajectory.id} (package {key.package_digest}, "
                f"harness {key.harness}, model {key.model}, sample {key.sample}); "
                "export to a .jsonl file to keep both"
            )
        written.add(trajectory.id)
        document = model.model_validate(atif_dict(trajectory)).to_json_dict()
        (out / f"{trajectory.id}.json").write_text(json.dumps(document, indent=2) + "\n")
        count += 1
    return count


def read_atif(path: Path) -> Iterator[Trajectory]:
    """Trajectories back from ``write_atif``'s output (a folder of JSON files, or JSONL)."""
    if path.is_dir():
        for file in sorted(path.glob("*.json")):
            yield from_atif(json.loads(file.read_text(encoding="utf-8")))
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield from_atif(json.loads(line))


# ---- Hugging Face dataset (parquet) ---------------------------------------------------------
def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ExportError(
            "the Hugging Face export writes parquet: pip install 'cowork-gym[export]'"
        ) from exc
    return pyarrow


def hf_schema() -> Any:
    """The dataset's columns as a ``pyarrow.Schema`` (fixed, so every file agrees)."""
    pa = _pyarrow()
    tool_call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.list_(tool_call)),
            ("tool_call_id", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("schema_version", pa.string()),
            ("environment", pa.string()),
            ("environment_digest", pa.string()),
            ("family", pa.string()),
            ("turns", pa.int32()),
            ("harness", pa.string()),
            ("model", pa.string()),
            ("sample", pa.int32()),
            ("messages", pa.list_(message)),
            ("trainable", pa.list_(pa.bool_())),
            ("sources", pa.list_(pa.string())),
            ("message_turns", pa.list_(pa.int32())),
            ("completion_token_ids", pa.list_(pa.list_(pa.int32()))),
            ("logprobs", pa.list_(pa.list_(pa.float64()))),
            ("prompt_token_ids", pa.list_(pa.list_(pa.int32()))),
            ("reward", pa.float64()),
            ("valid", pa.bool_()),
            ("invalid_reason", pa.string()),
            (
                "reward_components",
                pa.list_(pa.struct([("name", pa.string()), ("score", pa.float64())])),
            ),
            ("termination", pa.string()),
            ("simulator_faults", pa.list_(pa.string())),
            ("tool_steps", pa.int32()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
        ]
    )


def _invalid_reason(trajectory: Trajectory) -> str | None:
    verdict = trajectory.verification
    if verdict is None:
        return f"not verified (termination {trajectory.termination.reason})"
    return None if verdict.valid else verdict.invalid_reason


def hf_row(trajectory: Trajectory) -> dict[str, Any]:
    """One dataset row; messages and every per-message list align index by index."""
    verdict = trajectory.verification
    messages = trajectory.messages
    return {
        "id": trajectory.id,
        "schema_version": trajectory.schema_version,
        "environment": trajectory.environment.name,
        "environment_digest": trajectory.environment.digest,
        "family": trajectory.environment.family,
        "turns": trajectory.environment.turns,
        "harness": trajectory.policy.harness,
        "model": trajectory.policy.model,
        "sample": trajectory.key.sample,
        "messages": openai_messages(trajectory),
        "trainable": [m.trainable for m in messages],
        "sources": [m.source for m in messages],
        "message_turns": [m.turn for m in messages],
        "completion_token_ids": [m.tokens.completion_ids if m.tokens else None for m in messages],
        "logprobs": [m.tokens.logprobs if m.tokens else None for m in messages],
        "prompt_token_ids": [m.tokens.prompt_ids if m.tokens else None for m in messages],
        "reward": trajectory.reward,
        "valid": verdict is not None and verdict.valid,
        "invalid_reason": _invalid_reason(trajectory),
        "reward_components": [
            {"name": name, "score": score}
            for name, score in (verdict.components.items() if verdict else ())
        ],
        "termination": trajectory.termination.reason,
        "simulator_faults": [f.kind for f in trajectory.simulator_faults],
        "tool_steps": trajectory.tool_steps(),
        "prompt_tokens": trajectory.usage.prompt_tokens,
        "completion_tokens": trajectory.usage.completion_tokens,
    }


def write_hf_dataset(trajectories: Iterable[Trajectory], out: Path) -> tuple[Path, int]:
    """Write one parquet file: ``out`` itself when it ends in ``.parquet``, otherwise
    ``out/data/train-00000-of-00001.parquet`` (the Hub's layout, so a folder pushed as is
    loads as a ``train`` split). Rows stream in batches; memory stays flat."""
    pa = _pyarrow()
    path = out if out.suffix == ".parquet" else out / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = hf_schema()
    count = 0
    batch: list[dict[str, Any]] = []
    with pa.parquet.ParquetWriter(str(path), schema) as writer:
        for trajectory in trajectories:
            batch.append(hf_row(trajectory))
            if len(batch) >= PARQUET_BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    if count == 0:
        # `datasets` cannot load a parquet file without rows; say so here, not at load time.
        path.unlink()
        raise ExportError("no trajectories to export: the input holds none")
    return path, count
