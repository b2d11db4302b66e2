"""The S3 server is a real, separate server: boto3 round-trips objects and auth is checked."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from botocore.exceptions import ClientError

from coworkgym_testbed.s3 import client
from coworkgym_testbed.testbed import Testbed

pytestmark = pytest.mark.testbed


def test_put_get_list_delete(testbed: Testbed) -> None:
    s3 = testbed.s3_client()
    prefix = f"smoke-{uuid.uuid4().hex[:8]}/"
    bucket = testbed.s3_bucket
    payloads = {f"{prefix}a.txt": b"alpha", f"{prefix}dir/b.bin": bytes(range(256)) * 4096}
    for key, body in payloads.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)

    for key, body in payloads.items():
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
    assert sorted(o["Key"] for o in listed.get("Contents", [])) == sorted(payloads)

    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in payloads]})
    assert s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount") == 0
    s3.close()


def test_wrong_secret_is_refused(testbed: Testbed) -> None:
    wrong = replace(testbed.s3_credentials, secret_key="not-the-secret")
    s3 = client(testbed.s3_endpoint, wrong)
    with pytest.raises(ClientError) as err:
        s3.list_objects_v2(Bucket=testbed.s3_bucket)
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    s3.close()
