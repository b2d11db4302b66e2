"""Where released packages go: a local directory or any S3-compatible store (boto3).

Layout under the target: ``<name>/...`` (the package files) and ``manifests/<name>.json``
(one record per environment); ``manifest.jsonl`` is rebuilt from those records, so that
concurrent workers never append to one shared object. A record carries the spec digest:
re-running a campaign skips environments already released from the same spec.

S3 keeps no file modes, so each object carries its file's mode as user metadata
(``x-amz-meta-mode``: ``0755`` or ``0644``), and a symlink is an empty object whose
``x-amz-meta-symlink`` is its target; ``fetch_package`` restores both. Without them a
downloaded package's ``solution/solve.sh`` would no longer run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from .package.errors import PackageError
from .package.limits import (
    MAX_LOAD_ENTRIES,
    MAX_LOAD_FILE_BYTES,
    MAX_LOAD_TOTAL_BYTES,
    name_problem,
)
from .package.package import EnvironmentPackage, content_problems, write_tree

# User metadata keys (sent as x-amz-meta-<key>) that carry what S3 itself does not keep.
MODE_KEY = "mode"
SYMLINK_KEY = "symlink"
EXECUTABLE_MODE, REGULAR_MODE = "0755", "0644"


class Publisher(Protocol):
    def publish(self, name: str, pkg: EnvironmentPackage, record: dict[str, Any]) -> str: ...
    def released(self, name: str) -> dict[str, Any] | None: ...
    def write_manifest(self) -> str: ...


@dataclass
class LocalPublisher:
    root: Path

    def publish(self, name: str, pkg: EnvironmentPackage, record: dict[str, Any]) -> str:
        _check_release_name(name)
        target = pkg.write(self.root / name)
        manifests = self.root / "manifests"
        manifests.mkdir(parents=True, exist_ok=True)
        tmp = manifests / f".{name}.json.tmp"
        tmp.write_text(json.dumps({**record, "location": str(target)}, sort_keys=True))
        tmp.replace(manifests / f"{name}.json")  # atomic: a record means a complete package
        return str(target)

    def released(self, name: str) -> dict[str, Any] | None:
        path = self.root / "manifests" / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def write_manifest(self) -> str:
        records = sorted((self.root / "manifests").glob("*.json"))
        lines = [json.dumps(json.loads(p.read_text()), sort_keys=True) for p in records]
        path = self.root / "manifest.jsonl"
        self.root.mkdir(parents=True, exist_ok=True)  # a campaign that released nothing
        path.write_text("".join(f"{line}\n" for line in lines))
        return str(path)


class S3Publisher:
    """s3://bucket/prefix on AWS or any S3-compatible server (``AWS_ENDPOINT_URL`` or
    ``COWORKGYM_S3_ENDPOINT`` selects the endpoint; credentials come from the environment)."""

    def __init__(self, uri: str, client: Any | None = None) -> None:
        self.bucket, self.prefix = split_s3_uri(uri)
        self.client = client or make_s3_client()

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def publish(self, name: str, pkg: EnvironmentPackage, record: dict[str, Any]) -> str:
        _check_release_name(name)
        problems = content_problems(pkg.files, pkg.symlinks)
        if problems:  # a package built in memory, never loaded: held to the same rules
            raise PackageError(problems)
        # the manifest record goes last: a package is listed as released only once every
        # one of its objects is written
        for rel, content in sorted(pkg.files.items()):
            mode = EXECUTABLE_MODE if rel in pkg.executables else REGULAR_MODE
            self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(name, rel),
                Body=content,
                Metadata={MODE_KEY: mode},
            )
        for rel, target in sorted(pkg.symlinks.items()):
            self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(name, rel),
                Body=b"",
                Metadata={SYMLINK_KEY: target},
            )
        location = f"s3://{self.bucket}/{self._key(name)}"
        body = json.dumps({**record, "location": location}, sort_keys=True).encode()
        self.client.put_object(
            Bucket=self.bucket, Key=self._key("manifests", f"{name}.json"), Body=body
        )
        return location

    def released(self, name: str) -> dict[str, Any] | None:
        try:
            got = self.client.get_object(
                Bucket=self.bucket, Key=self._key("manifests", f"{name}.json")
            )
        except self.client.exceptions.NoSuchKey:
            return None
        return dict(json.loads(got["Body"].read()))

    def write_manifest(self) -> str:
        lines = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key("manifests") + "/"):
            for item in page.get("Contents", []):
                got = self.client.get_object(Bucket=self.bucket, Key=item["Key"])
                lines.append(json.dumps(json.loads(got["Body"].read()), sort_keys=True))
        key = self._key("manifest.jsonl")
        self.client.put_object(
            Bucket=self.bucket, Key=key, Body="".join(f"{x}\n" for x in sorted(lines)).encode()
        )
        return f"s3://{self.bucket}/{key}"


def _check_release_name(name: str) -> None:
    """A release name is a relative path below the target (Harbor names are org/name):
    never '..', '/x' or a control character."""
    if problem := name_problem(name):
        raise PackageError.single("release name", problem)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix without slashes) of an s3://bucket/prefix URI."""
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"not an s3:// URI: {uri!r}")
    return parsed.netloc, parsed.path.strip("/")


def fetch_package(uri: str, dest: Path, client: Any | None = None) -> Path:
    """Download the package released at ``uri`` (s3://bucket/prefix/<name>) into ``dest``,
    with its executables and symlinks as they were published. Errors name the URI."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_s3_uri(uri)
    if not prefix:
        raise PackageError.single(uri, "names a bucket, not a package; add the package's prefix")
    client = client or make_s3_client()
    files: dict[str, bytes] = {}
    executables: set[str] = set()
    symlinks: dict[str, str] = {}
    try:
        # the listing first: names and sizes are checked before any object is downloaded
        paginator = client.get_paginator("list_objects_v2")
        listed = [
            item
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix + "/")
            for item in page.get("Contents", [])
        ]
        _check_listing(uri, prefix, listed)
        for item in listed:
            rel = item["Key"][len(prefix) + 1 :]
            got = client.get_object(Bucket=bucket, Key=item["Key"])
            # never more than the limit, whatever the listing said
            body, meta = got["Body"].read(MAX_LOAD_FILE_BYTES + 1), got.get("Metadata", {})
            if len(body) > MAX_LOAD_FILE_BYTES:
                raise PackageError.single(uri, f"{rel}: larger than {MAX_LOAD_FILE_BYTES} bytes")
            if SYMLINK_KEY in meta:
                symlinks[rel] = meta[SYMLINK_KEY]
                continue
            files[rel] = body
            # No mode (an object uploaded by other means) reads as a regular file.
            if meta.get(MODE_KEY) == EXECUTABLE_MODE:
                executables.add(rel)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise PackageError.single(
            uri, f"S3 refused the download: {error.get('Code')} ({error.get('Message')})"
        ) from exc
    except BotoCoreError as exc:
        raise PackageError.single(uri, f"cannot reach the S3 store: {exc}") from exc
    if not files:
        raise PackageError.single(
            uri, "no objects under this prefix; give the location of a released package"
        )
    problems = content_problems(files, symlinks)
    if problems:
        raise PackageError([f"{uri}: {p}" for p in problems])
    return write_tree(dest, files, executables, symlinks)


def _check_listing(uri: str, prefix: str, listed: list[dict[str, Any]]) -> None:
    """Refuse a prefix whose keys would land outside the download folder (S3 keys may say
    '../'), or whose objects are too many or too large to hold, before downloading one."""
    if len(listed) > MAX_LOAD_ENTRIES:
        raise PackageError.single(uri, f"more than {MAX_LOAD_ENTRIES} objects; not a package")
    problems = []
    total = 0
    for item in listed:
        rel = item["Key"][len(prefix) + 1 :]
        size = int(item.get("Size", 0))
        total += size
        if problem := name_problem(rel):
            problems.append(f"{uri}: {problem}")
        elif size > MAX_LOAD_FILE_BYTES:
            problems.append(f"{uri}: {rel}: {size} bytes; at most {MAX_LOAD_FILE_BYTES}")
    if total > MAX_LOAD_TOTAL_BYTES:
        problems.append(f"{uri}: {total} bytes in all; at most {MAX_LOAD_TOTAL_BYTES}")
    if problems:
        raise PackageError(problems)


# botocore's default (legacy, 5 attempts) gives up within seconds of the store going away:
# the restart drill (tests/testbed/test_drill_control_plane.py) saw every release and its
# one retry fail during a SeaweedFS restart. Standard mode backs off up to 20 s a try, about
# a minute in all, which rides out a store restart.
S3_RETRIES: Any = {"mode": "standard", "max_attempts": 10}  # botocore's _RetryDict


def download_prefix(
    client: Any, bucket: str, key: str, dest: Path, skip: tuple[str, ...] = ()
) -> int:
    """Download every object under ``key/`` (the whole bucket when ``key`` is empty) into
    ``dest``, keeping the paths below the prefix, but the files named in ``skip``; returns
    how many were downloaded."""
    prefix = f"{key}/" if key else ""
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix) :]
            if not relative or relative.endswith("/") or Path(relative).name in skip:
                continue
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, item["Key"], str(target))
            count += 1
    return count


def upload_prefix(client: Any, folder: Path, bucket: str, key: str) -> int:
    """Upload every file below ``folder`` to ``key/`` (download_prefix's mirror: the paths
    below the folder are kept); returns how many were uploaded."""
    count = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        client.upload_file(str(path), bucket, f"{key}/{relative}" if key else relative)
        count += 1
    return count


def make_s3_client() -> Any:
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("COWORKGYM_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
    return boto3.client("s3", endpoint_url=endpoint, config=Config(retries=S3_RETRIES))


def publisher_for(target: str) -> Publisher:
    if target.startswith("s3://"):
        return S3Publisher(target)
    return LocalPublisher(Path(target))
