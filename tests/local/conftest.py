"""A moto server for the module (the in-process local stack) and fresh, uniquely named queues per test."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from engram_cli.local.stack import LocalStack, StackState, provision


@pytest.fixture(scope="module")
def moto_stack(tmp_path_factory) -> StackState:
    """The local stack on a free port with a bucket and one queue pair (``base``/``base-dlq``)."""
    stack = LocalStack(tmp_path_factory.mktemp("stack"), queues={"base": "base"}, notify_queue="base",
                       max_receives=3, port=0, bucket="base-bucket")
    state = stack.start()
    yield state
    stack.stop()


@pytest.fixture()
def make_queues(moto_stack) -> Callable[..., StackState]:
    """``make_queues(max_receives=2, visibility_timeout_s=1, roles=("work",))`` → a StackState with a new bucket and
    new queues (role → unique queue name, with DLQs) on the module's server; the bucket notifies the first role."""

    def make(max_receives: int = 2, visibility_timeout_s: int = 1, roles: tuple[str, ...] = ("work",),
             dsn: str | None = None) -> StackState:
        tag = uuid.uuid4().hex[:8]
        queues = {role: f"{role}-{tag}" for role in roles}
        return provision(moto_stack.endpoint, moto_stack.region, bucket=f"bucket-{tag}", queues=queues,
                         notify_queue=queues[roles[0]], max_receives=max_receives,
                         visibility_timeout_s=visibility_timeout_s, dsn=dsn)

    return make
