"""Drill 4 (issue 17), the release store: hostile objects in the test-bed's real S3 server
(SeaweedFS) under a package's prefix — keys that climb out with '../', a symlink object
aimed at /etc, an object over the size limit — are refused by `fetch_package` (what
`check s3://…`, `verify s3://…` and the rollout CLI use) before anything is written, and
a hostile in-memory package is refused by the publisher before its first object."""

from __future__ import annotations

import io
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from coworkgym.package.errors import PackageError
from coworkgym.package.limits import MAX_LOAD_FILE_BYTES
from coworkgym.release import S3Publisher, fetch_package
from coworkgym_testbed.testbed import Testbed
from tests.drills.record import DrillResult, Row, peak_rss_mb, record
from tests.support.builders import good_package

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def put(client: Any, bucket: str, key: str, body: bytes, **meta: str) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=meta)


class HeldKeys:
    """An S3 listing and its objects, for what SeaweedFS will not even store (a key with
    '../' is InvalidRequest there; AWS S3 keeps such a key as written). The same three
    calls fetch_package makes, nothing else."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_paginator(self, name: str) -> HeldKeys:
        return self

    def paginate(self, Bucket: str, Prefix: str) -> list[dict[str, Any]]:
        keys = [k for k in sorted(self.objects) if k.startswith(Prefix)]
        return [{"Contents": [{"Key": k, "Size": len(self.objects[k])} for k in keys]}]

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[Key]), "Metadata": {}}


def test_hostile_objects_in_the_store_are_refused_before_any_write(
    testbed_env: Testbed, tmp_path: Path
) -> None:
    tb = testbed_env
    client, bucket = tb.s3_client(), tb.s3_bucket
    good = good_package()
    cases: dict[str, tuple[str, Any, str]] = {
        # id → (what, a function that spoils the prefix, a part of the refusal)
        "symlink-object-out": (
            "a symlink object aimed at /etc",
            lambda p: put(client, bucket, f"{p}/environment/workspace/etc", b"", symlink="/etc"),
            "absolute symlink",
        ),
        "object-too-large": (
            f"an object over {MAX_LOAD_FILE_BYTES >> 20} MiB",
            lambda p: put(
                client, bucket, f"{p}/environment/big.csv", b"0" * (MAX_LOAD_FILE_BYTES + 1)
            ),
            "bytes; at most",
        ),
    }
    rows, wrong = [], []
    # SeaweedFS refuses to store a key that climbs out; a store that keeps one (AWS does)
    # is played by HeldKeys, so that fetch_package's own refusal is tested too
    try:
        put(client, bucket, "drill/pkg/../../escaped.txt", b"x")
        store_refused = False
    except Exception as exc:  # botocore's InvalidRequest
        store_refused = "InvalidRequest" in str(exc)
    held_keys = HeldKeys(
        {f"p/pkg/{rel}": data for rel, data in good.files.items()}
        | {"p/pkg/environment/../../../escaped.txt": b"x"}
    )
    dest = tmp_path / "held" / "downloads" / "pkg"
    with pytest.raises(PackageError, match=r"'\.\.'"):
        fetch_package("s3://b/p/pkg", dest, client=held_keys)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    rows.append(
        Row(
            what="an object key with '../' under the package's prefix",
            runs=2,
            held=int(store_refused) + int(written == []),
            note="SeaweedFS refuses to store it (InvalidRequest); from a store that keeps it "
            "(played in memory), fetch refuses before writing",
        )
    )
    for case_id, (what, spoil, says) in cases.items():
        target = f"drill-{uuid.uuid4().hex[:8]}"
        S3Publisher(f"s3://{bucket}/{target}", client).publish(good.name, good, {})
        prefix = f"{target}/{good.name}"
        spoil(prefix)
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
        kept = [o["Key"] for o in listed.get("Contents", [])]
        area = tmp_path / case_id
        dest = area / "downloads" / "pkg"
        rss, started = peak_rss_mb(), time.monotonic()
        try:
            fetch_package(f"s3://{bucket}/{prefix}", dest, client=client)
            refusal = ""
        except PackageError as exc:
            refusal = str(exc)
        seconds = time.monotonic() - started
        written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
        held = says in refusal and not dest.exists() and written == []
        if not held:
            wrong.append(f"{case_id}: refusal {refusal!r}, written {written}, kept {kept[-3:]}")
        rows.append(
            Row(
                what=what,
                runs=1,
                held=int(held),
                note=f"fetch refused before writing; peak RSS +{peak_rss_mb() - rss:.1f} MB; "
                f"{seconds:.2f} s",
            )
        )

    # the publisher holds an in-memory package to the loader's rules before its first object
    hostile = replace(good, symlinks={"environment/workspace/up": "../../../../etc"})
    prefix = f"drill-{uuid.uuid4().hex[:8]}"
    with pytest.raises(PackageError, match="points outside the package"):
        S3Publisher(f"s3://{bucket}/{prefix}", client).publish(good.name, hostile, {})
    stored = client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("KeyCount", 0)
    rows.append(
        Row(
            what="publishing a package whose symlink climbs out",
            runs=1,
            held=int(stored == 0),
            note=f"refused; {stored} objects written",
        )
    )
    record(
        DrillResult(
            drill="hostile-packages-s3",
            title="Hostile packages in the release store (S3)",
            summary="A good package published to the test-bed's SeaweedFS, then one hostile "
            "object added under its prefix; `fetch_package` must refuse it before writing.",
            rows=rows,
            figures={"cases": len(rows), "written_outside": 0 if not wrong else -1},
        )
    )
    assert not wrong, "\n".join(wrong)
    assert stored == 0
