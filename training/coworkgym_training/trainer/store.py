"""Where a run's checkpoints live: a folder, or an S3 prefix (boto3).

    TARGET/step-000010/   the model (save_pretrained), its tokenizer, trainer_state.pt
                          (optimizer, step, RNG) and checkpoint.json
    TARGET/latest.json    {"step": 10, "name": "step-000010"}: written last

A checkpoint counts only once ``latest.json`` names it, and that pointer is written after
every file of the checkpoint is in place (a folder is renamed into place first; on S3 the
objects are uploaded first). A worker killed mid-save leaves the previous checkpoint as
the latest, never a half-written one. The store is the run's only resume state: a
restarted worker group, a re-run of ``cowork-gym train`` or a new pod all resume from
``latest()`` the same way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

LATEST = "latest.json"


def step_name(step: int) -> str:
    return f"step-{step:06d}"


class CheckpointStore(Protocol):
    location: str

    def latest(self) -> int | None:
        """The step of the latest complete checkpoint, None when there is none."""

    def save(self, step: int, folder: Path, keep: int) -> str:
        """Store ``folder`` as the checkpoint of ``step``, make it the latest, keep the
        ``keep`` most recent ones; returns its URI."""

    def fetch(self, step: int, into: Path) -> Path:
        """The checkpoint of ``step`` as a local folder (``into`` for remote stores)."""

    def uri(self, step: int) -> str: ...


class LocalCheckpointStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def uri(self, step: int) -> str:
        return str(self.root / step_name(step))

    def latest(self) -> int | None:
        pointer = self.root / LATEST
        if not pointer.is_file():
            return None
        step = int(json.loads(pointer.read_text())["step"])
        return step if (self.root / step_name(step)).is_dir() else None

    def save(self, step: int, folder: Path, keep: int) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / step_name(step)
        staging = self.root / f".{step_name(step)}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(folder, staging)
        shutil.rmtree(final, ignore_errors=True)  # a re-save of the same step (a resumed run)
        staging.rename(final)
        _write_atomically(self.root / LATEST, _pointer(step))
        self._prune(keep, step)
        return str(final)

    def _prune(self, keep: int, latest: int) -> None:
        steps = sorted(
            int(p.name.removeprefix("step-")) for p in self.root.glob("step-*") if p.is_dir()
        )
        for old in [s for s in steps if s != latest][: max(0, len(steps) - keep)]:
            shutil.rmtree(self.root / step_name(old), ignore_errors=True)

    def fetch(self, step: int, into: Path) -> Path:
        return self.root / step_name(step)


class S3CheckpointStore:
    def __init__(self, uri: str, client: Any | None = None) -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"checkpoint {uri!r}: not an s3://bucket/prefix URI")
        self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/")
        if client is None:
            from coworkgym.release import make_s3_client

            client = make_s3_client()
        self.client = client
        self.location = uri.rstrip("/")

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def uri(self, step: int) -> str:
        return f"s3://{self.bucket}/{self._key(step_name(step))}"

    def latest(self) -> int | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(LATEST))["Body"]
        except self.client.exceptions.NoSuchKey:
            return None
        return int(json.loads(body.read())["step"])

    def save(self, step: int, folder: Path, keep: int) -> str:
        name = step_name(step)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            key = self._key(name, path.relative_to(folder).as_posix())
            self.client.upload_file(str(path), self.bucket, key)
        self.client.put_object(
            Bucket=self.bucket, Key=self._key(LATEST), Body=_pointer(step).encode()
        )
        self._prune(keep, step)
        return self.uri(step)

    def _objects(self, under: str) -> list[str]:
        keys: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=under):
            keys += [item["Key"] for item in page.get("Contents", [])]
        return keys

    def _prune(self, keep: int, latest: int) -> None:
        root = self._key("step-")
        by_step: dict[int, list[str]] = {}
        for key in self._objects(root):
            step = int(key.removeprefix(root).split("/", 1)[0])
            by_step.setdefault(step, []).append(key)
        old = [s for s in sorted(by_step) if s != latest][: max(0, len(by_step) - keep)]
        doomed = [{"Key": k} for s in old for k in by_step[s]]
        for start in range(0, len(doomed), 1000):  # delete_objects takes 1000 at most
            self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": doomed[start : start + 1000]}
            )

    def fetch(self, step: int, into: Path) -> Path:
        prefix = self._key(step_name(step)) + "/"
        keys = self._objects(prefix)
        if not keys:
            raise FileNotFoundError(f"{self.uri(step)}: no checkpoint objects there")
        into.mkdir(parents=True, exist_ok=True)
        for key in keys:
            target = into / key.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.client.download_file(self.bucket, key, str(target))
        return into


def store_for(target: str) -> CheckpointStore:
    if target.startswith("s3://"):
        return S3CheckpointStore(target)
    return LocalCheckpointStore(Path(target))


def _pointer(step: int) -> str:
    return json.dumps({"step": step, "name": step_name(step)}) + "\n"


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


__all__ = [
    "LATEST",
    "CheckpointStore",
    "LocalCheckpointStore",
    "S3CheckpointStore",
    "step_name",
    "store_for",
]
