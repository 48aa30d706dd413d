"""Reading drop-folder objects from S3 at the exact version an event announced."""

from __future__ import annotations

from chalicelib.config import Settings
from chalicelib.errors import UpstreamError
from chalicelib import aws

# Error codes meaning "not this object any more": it was overwritten (If-Match failed) or deleted since the event.
_GONE = ("PreconditionFailed", "412", "NoSuchKey", "404")


def read(settings: Settings, bucket: str, key: str, etag: str | None = None) -> bytes | None:
    """The object's bytes, or None when it no longer exists or (with ``etag``) was overwritten since — a newer S3
    event for the key then carries the work on.

    Raises:
        UpstreamError: S3 failed otherwise (the message is retried).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    kwargs = {"Bucket": bucket, "Key": key}
    if etag:
        kwargs["IfMatch"] = f'"{etag}"'
    try:
        return aws.client("s3", settings.aws_region).get_object(**kwargs)["Body"].read()
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in _GONE:
            return None
        raise UpstreamError(f"Reading s3://{bucket}/{key} failed: {str(exc)[:300]}") from exc
    except BotoCoreError as exc:
        raise UpstreamError(f"Reading s3://{bucket}/{key} failed: {str(exc)[:300]}") from exc
