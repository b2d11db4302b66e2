"""boto3 against the test-bed's S3 server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from .components import S3Credentials


def client(endpoint: str, creds: S3Credentials, **config: Any) -> S3Client:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=creds.access_key,
        aws_secret_access_key=creds.secret_key,
        region_name=creds.region,
        # Path-style: bucket.127.0.0.1 would not resolve.
        config=Config(s3={"addressing_style": "path"}, **config),
    )


def ensure_bucket(endpoint: str, creds: S3Credentials) -> bool:
    """Create the run's bucket if needed; False while the server is not answering yet."""
    from botocore.exceptions import BotoCoreError, ClientError

    # One quick try per call: the caller polls.
    s3 = client(endpoint, creds, connect_timeout=2, read_timeout=5, retries={"max_attempts": 1})
    try:
        names = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if creds.bucket not in names:
            s3.create_bucket(Bucket=creds.bucket)
        s3.head_bucket(Bucket=creds.bucket)
    except (BotoCoreError, ClientError):
        return False
    finally:
        s3.close()
    return True
