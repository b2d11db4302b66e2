"""The ``FROM`` lines of a Dockerfile (and the images its ``COPY --from`` reads), and the
same Dockerfile with each external image replaced by its local one (stage names, stage
indexes and ``scratch`` are kept)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

FROM_LINE = re.compile(r"^(\s*FROM\s+)(.*?)(\s*(?:#.*)?)$", re.IGNORECASE)
ARG_LINE = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.IGNORECASE)
COPY_FROM = re.compile(r"^(\s*(?:COPY|ADD)\s+(?:--\S+\s+)*?--from=)(\S+)", re.IGNORECASE)
STAGE_NAME = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*\S+\s+AS\s+(\S+)", re.IGNORECASE)
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class BaseReference:
    line: int  # 0-based line of the FROM
    image: str  # as written, ARG defaults substituted


class UnresolvedBase(ValueError):
    """A FROM whose image depends on a build argument with no default."""


def bases(dockerfile: str) -> list[BaseReference]:
    """The external images the Dockerfile builds on, in order."""
    found: list[BaseReference] = []
    args: dict[str, str] = {}
    stages: set[str] = set()
    for number, line in enumerate(dockerfile.splitlines()):
        arg = ARG_LINE.match(line)
        if arg and not found and not stages:  # only ARGs before the first FROM apply to FROM
            args[arg.group(1)] = (arg.group(2) or "").strip("\"'")
            continue
        matched = FROM_LINE.match(line)
        if not matched:
            continue
        words = [w for w in matched.group(2).split() if not w.startswith("--")]
        if not words:
            continue
        image = _substitute(words[0], args)
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())
        if image.lower() in stages - {words[2].lower() if len(words) >= 3 else ""}:
            continue  # an earlier stage of this build
        if image.lower() == "scratch":
            continue
        found.append(BaseReference(number, image))
    return found


def copied_images(dockerfile: str) -> list[str]:
    """Images a ``COPY --from`` reads that are not a stage of this build (nor its index)."""
    lines = dockerfile.splitlines()
    stages = {m.group(1).lower() for line in lines if (m := STAGE_NAME.match(line))}
    found: list[str] = []
    for line in lines:
        matched = COPY_FROM.match(line)
        image = matched.group(2).strip("\"'") if matched else ""
        if image and image.lower() not in stages and not image.isdigit() and image not in found:
            found.append(image)
    return found


def rewrite(dockerfile: str, local: Callable[[str], str]) -> str:
    """The Dockerfile with each external image (a base, or one ``COPY --from`` reads)
    replaced by ``local(image)``."""
    lines = dockerfile.splitlines(keepends=True)
    copied = set(copied_images(dockerfile))
    for number, text in enumerate(lines):
        matched = COPY_FROM.match(text)
        if matched and matched.group(2).strip("\"'") in copied:
            image = local(matched.group(2).strip("\"'"))
            lines[number] = matched.group(1) + image + text[matched.end() :]
    for ref in bases(dockerfile):
        text = lines[ref.line]
        ending = text[len(text.rstrip("\r\n")) :]
        matched = FROM_LINE.match(text.rstrip("\r\n"))
        assert matched is not None  # bases() found a FROM here
        head, rest, tail = matched.groups()
        words = rest.split()
        index = next(i for i, w in enumerate(words) if not w.startswith("--"))
        words[index] = local(ref.image)
        lines[ref.line] = head + " ".join(words) + tail + ending
    return "".join(lines)


def _substitute(word: str, args: dict[str, str]) -> str:
    def value(found: re.Match[str]) -> str:
        name = found.group(1) or found.group(3)
        if args.get(name):
            return args[name]
        if found.group(2) is not None:
            return found.group(2)
        raise UnresolvedBase(f"FROM {word}: build argument {name} has no default")

    return VARIABLE.sub(value, word)
