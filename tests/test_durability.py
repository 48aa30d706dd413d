"""Durability once per batch of work (``store.db.deferred_durability``) and follow-up messages held until the batch
is done (``dispatch.outbox.Outbox``): what the SQS consumer relies on to acknowledge a batch as a whole."""

from __future__ import annotations

import pytest

from chalicelib.dispatch.outbox import Outbox
from chalicelib.errors import UpstreamError
from chalicelib.ingest.messages import FileMessage
from chalicelib.store import vector_stores
from chalicelib.store.db import close_pools, connect, deferred_durability, pool, tenant_connection

TENANT = "durable"


@pytest.fixture(autouse=True)
def _pools():
    yield
    close_pools()


def _setting(conn) -> str:
    return conn.execute("SHOW synchronous_commit").fetchone()[0]


def test_commits_inside_wait_for_the_flush_at_the_end_and_nothing_leaks_to_other_work(settings):
    with connect(settings) as owner:
        vector_stores.ensure_tenant(owner, TENANT)
    with tenant_connection(settings, TENANT) as conn:
        assert _setting(conn) == "on"
    with deferred_durability(settings), tenant_connection(settings, TENANT) as conn:
        assert _setting(conn) == "off"
        conn.execute("UPDATE tenants SET id = id WHERE id = %s", (TENANT,))  # a write: a commit record
        written = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    with connect(settings) as owner:
        flushed = owner.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (written,)).fetchone()[0]
    assert flushed
    # The pooled connections went back reset: later work (an API request) commits synchronously again.
    for _ in range(3):
        with tenant_connection(settings, TENANT) as conn:
            assert _setting(conn) == "on"
        with pool(settings).connection() as conn:
            assert _setting(conn) == "on"


def test_a_failing_block_is_not_flushed_and_raises(settings):
    with pytest.raises(RuntimeError), deferred_durability(settings):
        with tenant_connection(settings, TENANT) as conn:
            assert _setting(conn) == "off"
        raise RuntimeError("the batch failed")
    with tenant_connection(settings, TENANT) as conn:
        assert _setting(conn) == "on"


class _Queue:
    durable = True

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[FileMessage]] = []
        self.fail = fail

    def send(self, messages):
        if self.fail:
            raise UpstreamError("SQS is down")
        self.calls.append(list(messages))


def test_outbox_holds_messages_until_one_flush():
    target = _Queue()
    outbox = Outbox(target)
    assert outbox.durable
    outbox.send([FileMessage("t", "vs_1", "file-1", 1)])
    outbox.send([FileMessage("t", "vs_1", "file-2", 1), FileMessage("t", "vs_1", "file-3", 2)])
    assert target.calls == []
    assert outbox.flush() == 3
    assert [m.file_id for m in target.calls[0]] == ["file-1", "file-2", "file-3"] and len(target.calls) == 1
    assert outbox.flush() == 0 and len(target.calls) == 1


def test_outbox_keeps_its_messages_when_the_send_fails():
    target = _Queue(fail=True)
    outbox = Outbox(target)
    outbox.send([FileMessage("t", "vs_1", "file-1", 1)])
    with pytest.raises(UpstreamError):
        outbox.flush()
    target.fail = False
    assert outbox.flush() == 1 and target.calls[0][0].file_id == "file-1"
