"""AWS clients, built on first use and cached per process (one cache for S3, SQS, Secrets Manager and Bedrock).

Nothing is built at import (Lambda cold starts and the API function never pay for a client they do not use).
Endpoints follow boto3's own configuration, so ``AWS_ENDPOINT_URL_SQS`` / ``AWS_ENDPOINT_URL_S3`` point the
clients at a moto server locally; :func:`reset` forgets them when a test switches stacks. boto3 clients are
thread-safe once built; building one is not (boto3's default session), hence the lock.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["client", "queue_url", "reset"]

_lock = threading.Lock()


@functools.cache
def client(service: str, region: str | None, *, timeout_s: float | None = None, retries: int | None = None,
           max_pool_connections: int | None = None, endpoint_url: str | None = None) -> Any:
    """The boto3 client for ``service`` in ``region`` (None: boto3's own resolution, ``AWS_REGION`` in Lambda),
    one per distinct set of options.

    Args:
        timeout_s: botocore connect and read timeout, seconds (None: botocore's 60 s).
        retries: retries after the first attempt, botocore ``standard`` mode (None: botocore's default); botocore's
            ``total_max_attempts`` counts the first call too, hence ``retries + 1``.
        max_pool_connections: HTTP connections kept per client (None: botocore's 10).
        endpoint_url: a non-default endpoint (a VPC endpoint, a fake server in tests).
    """
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {}
    if timeout_s is not None:
        options.update(connect_timeout=timeout_s, read_timeout=timeout_s)
    if retries is not None:
        options["retries"] = {"mode": "standard", "total_max_attempts": max(0, retries) + 1}
    if max_pool_connections is not None:
        options["max_pool_connections"] = max_pool_connections
    with _lock:
        return boto3.client(service, region_name=region, endpoint_url=endpoint_url,
                            config=Config(**options) if options else None)


@functools.cache
def queue_url(region: str, queue: str) -> str:
    """The URL of SQS ``queue`` (a name, or already a URL) in ``region``, looked up once.

    Raises:
        botocore.exceptions.ClientError: no such queue.
    """
    if queue.startswith(("https://", "http://")):
        return queue
    return client("sqs", region).get_queue_url(QueueName=queue)["QueueUrl"]


def reset() -> None:
    """Forget every cached client and queue URL (tests switching between moto stacks)."""
    client.cache_clear()
    queue_url.cache_clear()
