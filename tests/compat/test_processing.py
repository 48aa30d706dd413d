"""No file stays ``in_progress`` forever (OPENAI-COMPAT.md §7.1): a file whose worker died is failed on the next
read once its attempts are used up, re-claimed and re-sent by housekeeping while attempts remain, and a processing
lease is never held by two claimers at once."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

import openai
import pytest

from chalicelib.jobs import runner
from chalicelib.store import attachments, ingest_jobs
from chalicelib.store.db import connect

POLL_DEADLINE_S = 30.0
TENANT = "acme"  # the ``client`` fixture's tenant


def wait_until(predicate: Callable[[], Any], seconds: float = POLL_DEADLINE_S, interval_s: float = 0.05) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {seconds:.0f} s")
        time.sleep(interval_s)


def retry_stalled(settings) -> None:
    """Run the housekeeping job that re-sends stalled files (the server's background threads process them)."""
    outcome = runner.run_job(settings, "retry_stalled_files", force=True)
    assert outcome.status == "finished", outcome


def attach_small(client: openai.OpenAI, store_id: str, name: str, text: str, **kwargs: Any) -> str:
    file_id = client.files.create(file=(name, text.encode()), purpose="assistants").id
    attached = client.vector_stores.files.create(vector_store_id=store_id, file_id=file_id, **kwargs)
    assert attached.status == "completed"
    return file_id


def set_row(settings, store_id: str, file_id: str, *, attempts: int, lease_sql: str | None) -> None:
    """Put an attachment back to ``in_progress`` as a worker would have left it (``lease_sql`` is SQL for
    ``lease_expires_at``; None for no lease — attached a lease ago and never claimed)."""
    lease = lease_sql or "NULL"
    updated = "now()" if lease_sql else f"now() - make_interval(secs => {settings.processing_lease_s + 1})"
    with connect(settings) as conn:
        conn.execute(f"""UPDATE vector_store_files SET status = 'in_progress', attempts = %s,
                         lease_expires_at = {lease}, last_error = NULL, updated_at = {updated}
                         WHERE vector_store_id = %s AND file_id = %s""", (attempts, store_id, file_id))


def row(settings, store_id: str, file_id: str) -> tuple[str, int, Any]:
    with connect(settings) as conn:
        return conn.execute("SELECT status, attempts, lease_expires_at FROM vector_store_files "
                            "WHERE vector_store_id = %s AND file_id = %s", (store_id, file_id)).fetchone()


def chunk_count(settings, store_id: str, file_id: str) -> int:
    with connect(settings) as conn:
        return conn.execute("SELECT count(*) FROM chunks WHERE vector_store_id = %s AND file_id = %s",
                            (store_id, file_id)).fetchone()[0]


def test_dead_worker_out_of_attempts_fails_on_read(client, api_settings):
    store = client.vector_stores.create(name="dead-worker")
    keep = attach_small(client, store.id, "keep.txt", "Walruses haul out on the ice floes.")
    dead = attach_small(client, store.id, "dead.txt", "Puffins nest in burrows on the cliffs.")
    assert chunk_count(api_settings, store.id, dead) > 0
    set_row(api_settings, store.id, dead, attempts=api_settings.processing_max_attempts,
            lease_sql="now() - interval '1 second'")
    got = client.vector_stores.files.retrieve(dead, vector_store_id=store.id)
    assert got.status == "failed"
    assert got.last_error is not None and got.last_error.code == "server_error" and got.last_error.message
    assert got.usage_bytes == 0
    assert row(api_settings, store.id, dead)[0] == "failed"
    assert chunk_count(api_settings, store.id, dead) == 0
    retrieved = client.vector_stores.retrieve(store.id)
    assert retrieved.file_counts.model_dump() == {"in_progress": 0, "completed": 1, "failed": 1, "cancelled": 0,
                                                  "total": 2}
    assert retrieved.status == "completed"
    assert retrieved.usage_bytes == client.vector_stores.files.retrieve(keep, vector_store_id=store.id).usage_bytes
    assert [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, filter="failed")] == [dead]
    assert dead not in {h.file_id for h in client.vector_stores.search(store.id, query="puffins burrows").data}
    # Re-attaching a failed file starts over.
    again = client.vector_stores.files.create(vector_store_id=store.id, file_id=dead)
    assert again.status == "completed" and again.last_error is None


@pytest.mark.parametrize("read", ["store", "list", "batch"])
def test_every_read_settles(client, api_settings, read):
    store = client.vector_stores.create(name=f"settle-{read}")
    batch = client.vector_stores.file_batches.create(
        store.id, file_ids=[client.files.create(file=("s.txt", b"Settle me."), purpose="assistants").id])
    (file_id,) = [f.id for f in client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)]
    set_row(api_settings, store.id, file_id, attempts=api_settings.processing_max_attempts,
            lease_sql="now() - interval '1 second'")
    if read == "store":
        assert client.vector_stores.retrieve(store.id).file_counts.failed == 1
    elif read == "list":
        (only,) = client.vector_stores.files.list(vector_store_id=store.id).data
        assert only.status == "failed" and only.last_error.code == "server_error"
    else:
        got = client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
        assert got.file_counts.failed == 1 and got.file_counts.in_progress == 0 and got.status == "failed"
    assert row(api_settings, store.id, file_id)[0] == "failed"


def test_live_lease_at_max_attempts_stays_in_progress(client, api_settings):
    store = client.vector_stores.create(name="live-lease")
    file_id = attach_small(client, store.id, "live.txt", "Still being processed.")
    set_row(api_settings, store.id, file_id, attempts=api_settings.processing_max_attempts,
            lease_sql="now() + interval '1 minute'")
    raw = client.vector_stores.files.with_raw_response.retrieve(file_id, vector_store_id=store.id)
    assert raw.parse().status == "in_progress"
    assert raw.headers.get("openai-poll-after-ms") == str(api_settings.poll_after_ms)
    assert client.vector_stores.retrieve(store.id).file_counts.in_progress == 1
    assert client.vector_stores.retrieve(store.id).status == "in_progress"
    # The lease runs out: the next read fails it.
    with connect(api_settings) as conn:
        conn.execute("UPDATE vector_store_files SET lease_expires_at = now() - interval '1 second' "
                     "WHERE vector_store_id = %s AND file_id = %s", (store.id, file_id))
    assert client.vector_stores.files.retrieve(file_id, vector_store_id=store.id).status == "failed"


def test_housekeeping_fails_exhausted_files_without_a_read(client, api_settings):
    store = client.vector_stores.create(name="housekeeping")
    file_id = attach_small(client, store.id, "h.txt", "Nobody reads this store.")
    set_row(api_settings, store.id, file_id, attempts=api_settings.processing_max_attempts,
            lease_sql="now() - interval '1 second'")
    assert runner.run_job(api_settings, "settle_files", force=True).counts["failed_files"] >= 1
    assert row(api_settings, store.id, file_id)[0] == "failed"


@pytest.mark.parametrize("claimed", [True, False], ids=["lease-expired", "never-claimed"])
def test_expired_lease_with_attempts_left_is_reclaimed(client, api_settings, claimed):
    store = client.vector_stores.create(name="reclaim")
    file_id = attach_small(client, store.id, "r.txt", "Narwhal tusks are elongated teeth.",
                           attributes={"tag": "tusk"})
    attempts = row(api_settings, store.id, file_id)[1]
    if claimed:  # its worker died holding the lease of the version it claimed
        set_row(api_settings, store.id, file_id, attempts=attempts, lease_sql="now() - interval '1 second'")
    else:  # re-attached a lease ago (a new attempt range), and no worker ever claimed it
        set_row(api_settings, store.id, file_id, attempts=attempts, lease_sql=None)
        with connect(api_settings) as conn:
            conn.execute("UPDATE vector_store_files SET attempt_base = attempts WHERE file_id = %s", (file_id,))
    with connect(api_settings) as conn:  # a dead first attempt may have left no chunks at all
        conn.execute("DELETE FROM chunks WHERE vector_store_id = %s AND file_id = %s", (store.id, file_id))
    assert client.vector_stores.files.retrieve(file_id, vector_store_id=store.id).status == "in_progress"
    retry_stalled(api_settings)
    done = client.vector_stores.files.poll(file_id, vector_store_id=store.id, max_wait_seconds=POLL_DEADLINE_S)
    assert done.status == "completed" and done.last_error is None and done.attributes == {"tag": "tusk"}
    status, attempts_now, lease = row(api_settings, store.id, file_id)
    assert status == "completed" and attempts_now == attempts + 1 and lease is None
    hits = client.vector_stores.search(store.id, query="narwhal tusks",
                                       filters={"type": "eq", "key": "tag", "value": "tusk"}).data
    assert [h.file_id for h in hits] == [file_id]
    assert client.vector_stores.retrieve(store.id).file_counts.completed == 1


def test_zombie_worker_cannot_overwrite_a_settled_file(client, api_settings, hashing_embedder):
    from datetime import datetime

    from chalicelib.dispatch.local import LocalDispatcher
    from chalicelib.dispatch.port import Delivery
    from chalicelib.ingest import engine

    store = client.vector_stores.create(name="zombie")
    file_id = attach_small(client, store.id, "z.txt", "A worker that wakes up too late.")
    # attempts above what housekeeping may claim, so only this test claims it.
    blocked = api_settings.processing_max_attempts
    set_row(api_settings, store.id, file_id, attempts=blocked, lease_sql=None)
    settings = dataclasses.replace(api_settings, processing_lease_s=0.0, processing_max_attempts=blocked + 1)
    with connect(api_settings) as conn:
        (message,) = engine.start(conn, settings, TENANT, store.id, [file_id])
        received = datetime.now(UTC)
        assert message.version == blocked + 1
        time.sleep(0.01)  # the zero-second lease is now past
        attachments.settle(conn, max_attempts=blocked + 1, tenant_id=TENANT, store_id=store.id)
        assert row(api_settings, store.id, file_id)[0] == "failed"
        delivery = Delivery(settings=settings, dispatcher=LocalDispatcher(settings, threads=0), arrived_at=received,
                            inline=True)
        with pytest.raises(engine.VersionFailedError):
            engine.stage(conn, delivery, hashing_embedder, message)
    got = client.vector_stores.files.retrieve(file_id, vector_store_id=store.id)
    assert got.status == "failed" and got.last_error.code == "server_error"
    assert chunk_count(api_settings, store.id, file_id) == 0


@pytest.fixture()
def claimable(client, api_settings):
    """A store of 20 attachments reset to ``in_progress`` with ``attempts = processing_max_attempts`` and an expired
    lease: claimable by this test's claimers (``max_attempts`` above that) but never by the server's housekeeping
    or settled by reads. Yields ``(store_id, file_ids, max_attempts)``; the store is deleted afterwards."""
    store = client.vector_stores.create(name="claims")
    file_ids = [client.files.create(file=(f"c{i}.txt", f"claim {i}".encode()), purpose="assistants").id
                for i in range(20)]
    batch = client.vector_stores.file_batches.create(store.id, file_ids=file_ids)
    assert batch.file_counts.completed == 20
    blocked = api_settings.processing_max_attempts
    with connect(api_settings) as conn:
        conn.execute("UPDATE vector_store_files SET status = 'in_progress', attempts = %s, "
                     "lease_expires_at = now() - interval '1 second' WHERE vector_store_id = %s", (blocked, store.id))
    yield store.id, set(file_ids), blocked + 10
    client.vector_stores.delete(store.id)


def _claim_stuck(conn, max_attempts: int, limit: int = 1) -> list[tuple[str, str, str, int]]:
    return ingest_jobs.claim_stuck(conn, lease_s=300, max_attempts=max_attempts, stall_s=0, limit=limit,
                                   tenant_id=TENANT)


def test_claim_stuck_skips_rows_another_claimer_holds(api_settings, claimable):
    store_id, file_ids, max_attempts = claimable
    first, second = connect(api_settings), connect(api_settings)
    try:
        with first.transaction():
            (held,) = _claim_stuck(first, max_attempts)
            assert held[1] == store_id and held[2] in file_ids and held[0] == TENANT
            # While the first claim is uncommitted its row is locked: the second claimer skips it at once.
            started = time.monotonic()
            (other,) = _claim_stuck(second, max_attempts)
            assert time.monotonic() - started < 5
            assert other[2] != held[2]
        # Committed: the lease now keeps everyone else off both rows.
        assert attachments.claim(second, TENANT, store_id, held[2], lease_s=300, max_attempts=max_attempts) is None
        assert attachments.claim(first, TENANT, store_id, other[2], lease_s=300, max_attempts=max_attempts) is None
    finally:
        first.close()
        second.close()


def test_claim_blocks_then_refuses_a_row_being_claimed(api_settings, claimable):
    store_id, file_ids, max_attempts = claimable
    target = sorted(file_ids)[0]
    first, second = connect(api_settings), connect(api_settings)
    outcome: dict[str, Any] = {}
    try:
        with first.transaction():
            assert attachments.claim(first, TENANT, store_id, target, lease_s=300,
                                     max_attempts=max_attempts) == max_attempts - 10 + 1

            def contend() -> None:
                outcome["attempt"] = attachments.claim(second, TENANT, store_id, target, lease_s=300,
                                                       max_attempts=max_attempts)

            thread = threading.Thread(target=contend, daemon=True)
            thread.start()
            thread.join(0.3)
            assert thread.is_alive(), "the second claim should wait for the first claimer's row lock"
        thread.join(10)
        assert not thread.is_alive() and outcome["attempt"] is None
        # Out of attempts, or not in_progress: nobody can claim.
        other = sorted(file_ids)[1]
        assert attachments.claim(first, TENANT, store_id, other, lease_s=300, max_attempts=max_attempts - 10) is None
        first.execute("UPDATE vector_store_files SET status = 'completed' WHERE vector_store_id = %s "
                      "AND file_id = %s", (store_id, other))
        assert attachments.claim(first, TENANT, store_id, other, lease_s=300, max_attempts=max_attempts) is None
    finally:
        first.close()
        second.close()


def test_concurrent_claimers_never_share_a_file(api_settings, claimable):
    store_id, file_ids, max_attempts = claimable
    claimed: list[list[str]] = [[] for _ in range(4)]
    barrier = threading.Barrier(len(claimed))
    errors: list[BaseException] = []

    def claimer(mine: list[str]) -> None:
        try:
            with connect(api_settings) as conn:
                barrier.wait(10)
                while rows := _claim_stuck(conn, max_attempts):
                    mine.extend(row[2] for row in rows if row[1] == store_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(mine,), daemon=True) for mine in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(POLL_DEADLINE_S)
    assert not any(t.is_alive() for t in threads) and not errors
    every = [file_id for mine in claimed for file_id in mine]
    assert len(every) == len(set(every)), "a file was handed to two claimers"
    assert set(every) == file_ids
    with connect(api_settings) as conn:
        attempts = {r[0] for r in conn.execute("SELECT attempts FROM vector_store_files WHERE vector_store_id = %s",
                                                (store_id,)).fetchall()}
    assert attempts == {max_attempts - 10 + 1}  # each row claimed exactly once
