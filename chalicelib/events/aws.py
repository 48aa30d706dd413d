"""boto3 clients for the event path, built on first use and cached per region (nothing at import: Lambda cold
starts and the API function never pay for them). Endpoints follow boto3's own configuration, so
``AWS_ENDPOINT_URL_SQS`` / ``AWS_ENDPOINT_URL_S3`` point them at a moto server locally."""

from __future__ import annotations

import functools
import threading
from typing import Any

_lock = threading.Lock()


@functools.cache
def _client(service: str, region: str) -> Any:
    import boto3

    with _lock:  # boto3's default session is not thread-safe while creating clients
        return boto3.client(service, region_name=region)


def sqs(region: str) -> Any:
    """The SQS client for ``region``."""
    return _client("sqs", region)


def s3(region: str) -> Any:
    """The S3 client for ``region``."""
    return _client("s3", region)


@functools.cache
def queue_url(region: str, queue: str) -> str:
    """The URL of ``queue`` (a name, or already a URL) in ``region``, looked up once.

    Raises:
        botocore.exceptions.ClientError: no such queue.
    """
    if queue.startswith(("https://", "http://")):
        return queue
    return sqs(region).get_queue_url(QueueName=queue)["QueueUrl"]


def reset() -> None:
    """Forget every cached client and queue URL (tests switching between moto sessions)."""
    _client.cache_clear()
    queue_url.cache_clear()
