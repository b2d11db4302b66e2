"""Errors that point at the file and field to fix."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class PackageError(Exception):
    """A package file is missing or invalid. ``problems`` are 'file: field: message' lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))

    @classmethod
    def single(cls, file: str, message: str, field: str | None = None) -> PackageError:
        return cls([f"{file}: {field}: {message}" if field else f"{file}: {message}"])

    @classmethod
    def from_validation(cls, file: str, error: ValidationError) -> PackageError:
        return cls([f"{file}: {location(e['loc'])}: {explain(e)}" for e in error.errors()])


def location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(item)
    return ".".join(parts) or "(root)"


def explain(error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field; remove it or correct its name"
    if error["type"] == "missing":
        return "required field is missing; add it"
    return str(error["msg"])
