"""Harbor's ``.harborignore``: gitignore-style patterns that keep files of ``tests/``,
``solution/`` and ``steps/<name>/{tests,solution}/`` out of what Harbor uploads.

Honoured with ``pathspec`` (a dependency of Harbor, so present with the ``harbor`` extra):
every ``.harborignore`` in a scope directory or below applies to the files under it, as in
Harbor's ``TaskFileFilter``; the ignore files themselves are never uploaded. Without
pathspec the patterns cannot be read, and ``unhonoured`` says so.
"""

from __future__ import annotations

from pathlib import PurePosixPath

IGNORE_FILE = ".harborignore"


def uploaded(files: dict[str, bytes], scope: str) -> dict[str, bytes]:
    """The files under ``scope`` (keyed relative to it) that Harbor would upload."""
    base = scope.rstrip("/") + "/"
    under = {rel[len(base) :]: data for rel, data in files.items() if rel.startswith(base)}
    ignores = {rel: data for rel, data in under.items() if PurePosixPath(rel).name == IGNORE_FILE}
    if not ignores:
        return under
    try:
        from pathspec import GitIgnoreSpec
    except ImportError:  # cannot honour the patterns: upload all but the ignore files
        return {rel: data for rel, data in under.items() if rel not in ignores}
    specs = []
    for rel, data in ignores.items():
        folder = PurePosixPath(rel).parent.as_posix()
        lines = data.decode("utf-8", errors="replace").splitlines()
        specs.append(("" if folder == "." else folder + "/", GitIgnoreSpec.from_lines(lines)))
    kept = {}
    for rel, data in under.items():
        if rel in ignores:
            continue
        excluded = any(
            rel.startswith(folder) and spec.match_file(rel[len(folder) :]) for folder, spec in specs
        )
        if not excluded:
            kept[rel] = data
    return kept


def unhonoured(files: dict[str, bytes]) -> list[str]:
    """``.harborignore`` files this installation cannot apply (pathspec missing)."""
    try:
        import pathspec  # noqa: F401
    except ImportError:
        return sorted(rel for rel in files if PurePosixPath(rel).name == IGNORE_FILE)
    return []
