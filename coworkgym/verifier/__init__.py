"""The hybrid verifier: a spec (data) run by a fixed engine, plus the rubric judge interface."""

from __future__ import annotations

from importlib import resources


def engine_files() -> dict[str, bytes]:
    """The engine's source files, as copied into a package's ``tests/cowork_verifier/``."""
    root = resources.files("coworkgym.verifier.engine")
    return {
        entry.name: entry.read_bytes()
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".py")
    }
