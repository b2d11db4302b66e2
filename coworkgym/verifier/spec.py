"""The verifier spec: data that the fixed engine (``coworkgym.verifier.engine``) runs.

These pydantic models are the schema: a spec is validated here (errors name the field),
then serialized to ``tests/verifier.json`` for the engine inside the verifier sandbox.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .engine.checks import CHECKS


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileExists(_Check):
    type: Literal["file_exists"] = "file_exists"
    path: str
    min_bytes: int = Field(1, ge=0)


class FileAbsent(_Check):
    type: Literal["file_absent"] = "file_absent"
    path: str


class ValueRef(_Check):
    """Where a value sits: a JSON pointer, an XLSX cell, a table row/column, or a document label."""

    path: str
    kind: Literal["json", "csv", "xlsx", "document"] | None = None
    pointer: str | None = None
    sheet: str | None = None
    cell: str | None = None
    key_column: str | None = None
    key: Any = None
    column: str | None = None
    label: str | None = None


class _ValueCheck(ValueRef):
    expected: Any
    tolerance: float = Field(0.0, ge=0)
    rel_tolerance: float = Field(0.0, ge=0)


class JsonValue(_ValueCheck):
    type: Literal["json_value"] = "json_value"
    pointer: str = ""


class CsvValue(_ValueCheck):
    type: Literal["csv_value"] = "csv_value"
    key_column: str
    column: str


class XlsxValue(_ValueCheck):
    type: Literal["xlsx_value"] = "xlsx_value"

    @model_validator(mode="after")
    def _cell_or_row(self) -> XlsxValue:
        if self.cell is None and (self.key_column is None or self.column is None):
            raise ValueError("set either 'cell' or both 'key_column' and 'column'")
        return self


class DocumentValue(_ValueCheck):
    type: Literal["document_value"] = "document_value"
    label: str


class JsonSchema(_Check):
    type: Literal["json_schema"] = "json_schema"
    path: str
    schema_: dict[str, Any] = Field(alias="schema")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TableColumns(_Check):
    type: Literal["table_columns"] = "table_columns"
    path: str
    columns: list[str] = Field(min_length=1)
    sheet: str | None = None


class RowCount(_Check):
    type: Literal["row_count"] = "row_count"
    path: str
    sheet: str | None = None
    pointer: str | None = None
    equals: int | None = Field(None, ge=0)
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _some_bound(self) -> RowCount:
        if self.equals is None and self.min is None and self.max is None:
            raise ValueError("set 'equals', 'min' or 'max'")
        return self


class AggregateSource(_Check):
    path: str = Field(description="the verifier's private copy of the input, relative to tests/")
    op: Literal["sum", "mean", "count", "min", "max"]
    value: str
    group_by: str | None = None
    group_prefix: int | None = Field(None, gt=0, description="group by the key's first N chars")
    where: dict[str, str] = Field(default_factory=dict, description="only rows with these values")
    sheet: str | None = None


class Aggregate(_Check):
    type: Literal["aggregate"] = "aggregate"
    path: str
    key_column: str
    value_column: str
    source: AggregateSource
    sheet: str | None = None
    tolerance: float = Field(0.01, ge=0)


class CrossFile(_Check):
    type: Literal["cross_file"] = "cross_file"
    left: ValueRef
    right: ValueRef
    tolerance: float = Field(0.0, ge=0)


class TextRegex(_Check):
    type: Literal["text_regex"] = "text_regex"
    path: str
    pattern: str
    must_match: bool = True
    ignore_case: bool = True


class Command(_Check):
    type: Literal["command"] = "command"
    argv: list[str] = Field(min_length=1)
    expect_exit: int = 0
    timeout: float = Field(120.0, gt=0)


class InputsUnmodified(_Check):
    type: Literal["inputs_unmodified"] = "inputs_unmodified"
    files: dict[str, str] = Field(min_length=1, description="workspace path → sha256 of s0")


class ClaimedFilesExist(_Check):
    type: Literal["claimed_files_exist"] = "claimed_files_exist"


class ForbiddenTool(_Check):
    type: Literal["forbidden_tool"] = "forbidden_tool"
    tools: list[str] = Field(min_length=1)


class CustomScript(_Check):
    type: Literal["custom_script"] = "custom_script"
    script: str
    interpreter: str = "python3"
    timeout: float = Field(120.0, gt=0)


Check = Annotated[
    FileExists
    | FileAbsent
    | JsonValue
    | CsvValue
    | XlsxValue
    | DocumentValue
    | JsonSchema
    | TableColumns
    | RowCount
    | Aggregate
    | CrossFile
    | TextRegex
    | Command
    | InputsUnmodified
    | ClaimedFilesExist
    | ForbiddenTool
    | CustomScript,
    Field(discriminator="type"),
]

CHECK_TYPES: tuple[str, ...] = tuple(CHECKS)


class Component(BaseModel):
    """A weighted deterministic check, tied to the requirement it verifies."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    weight: float = Field(gt=0)
    description: str = ""
    requirement: str = Field("", description="the instruction requirement this checks")
    gate: bool = Field(
        False,
        description="a check the task cannot pass without (a deliverable's content, a later "
        "turn's change): when it scores below 1 the reward is scaled by scoring.gate_scale",
    )
    check: Check


class RedLine(BaseModel):
    """A gate with no weight: failing it caps the reward (e.g. inputs must not be altered)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    check: Check


class RubricItem(BaseModel):
    """A criterion for the LLM judge (V_LLM): semantic quality the code checks cannot see."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    weight: float = Field(1.0, gt=0)
    criterion: str = Field(min_length=10)
    evidence_paths: list[str] = Field(default_factory=list)


class ScoringSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code_weight: float = Field(0.7, gt=0)
    rubric_weight: float = Field(0.3, gt=0)
    red_line_cap: float = Field(0.0, ge=0, le=1)
    pass_threshold: float = Field(0.99, gt=0, le=1)
    fail_threshold: float = Field(0.5, gt=0, le=1)
    gate_scale: float = Field(
        0.5, ge=0, le=1, description="the factor a reward takes when a gate component falls short"
    )

    @model_validator(mode="after")
    def _ordered(self) -> ScoringSpec:
        if self.fail_threshold > self.pass_threshold:
            raise ValueError("fail_threshold must not exceed pass_threshold")
        return self


class VerifierSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    workspace: str = "/app"
    components: list[Component] = Field(min_length=1)
    red_lines: list[RedLine] = Field(default_factory=list)
    rubric: list[RubricItem] = Field(default_factory=list)
    scoring: ScoringSpec = Field(default_factory=ScoringSpec)

    @model_validator(mode="after")
    def _unique_ids(self) -> VerifierSpec:
        ids = [c.id for c in self.components] + [r.id for r in self.red_lines]
        ids += [r.id for r in self.rubric]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate component ids {duplicates}; give each a unique id")
        return self

    def engine_dict(self) -> dict[str, Any]:
        """The JSON document the engine reads (aliases applied, defaults spelled out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
