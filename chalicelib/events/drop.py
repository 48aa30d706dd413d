"""The S3 drop folder: applying one S3 event record to the vector store its key names.

``s3://<bucket>/<tenant>/<store name or vs_ id>/<path>``:

- created (put, copy, multipart): the store is found or created (by name, with the deployment's embedding model),
  the object becomes (or updates) the file named ``<path>``, its sidecar's attributes are applied, a new version
  is claimed and staged (:func:`chalicelib.ingest.engine.stage`); an overwrite's new version replaces the old
  chunks atomically when it completes;
- removed: the file is deleted from the store (with its chunks);
- ``<path>.metadata.json``: the sidecar's ``metadataAttributes`` become the file's attributes, without
  re-embedding (a sidecar may arrive before its file: it is remembered).

Events of one key are applied under that key's ``drop_objects`` row lock and compared with the newest one applied
(S3 ``sequencer``; moto sends none, then ``eventTime`` and the ETag): an older event is ignored, the same event
(a duplicate) only resumes its version. A drop-folder sync (:mod:`chalicelib.events.sync`) applies what it finds
missing through :func:`apply` too, as synced records (``S3Record.synced``) ordered the same way. A key that names
no tenant, or no usable store, leaves a ``drop_errors`` row.

Trust: whoever may write the bucket may write into any tenant's stores (the key names the tenant); deployments
scope writers to ``<tenant>/*`` with the per-tenant policies of ``infra/`` (infra/README.md). A tenant whose drop
folder is off (:func:`chalicelib.store.tenants.set_drop_folder`) has every event refused (``drop_folder_disabled``)
and nothing changed. A created object is held to the tenant's limits as an API upload and attach are
(:func:`chalicelib.store.tenants.max_file_bytes`, :func:`chalicelib.store.tenants.check_store_capacity`): one
over them is refused (``file_too_large``, ``too_many_files``, ``storage_limit_exceeded``) and nothing attached.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime

import psycopg

from chalicelib import ids
from chalicelib.config import Settings
from chalicelib.dispatch.port import Delivery
from chalicelib.embed.base import Embedder
from chalicelib.errors import (
    ConflictError,
    EmbeddingMismatchError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from chalicelib.events import s3_keys, sidecar
from chalicelib.events.notifications import S3Record, compare_sequencers
from chalicelib.events.s3_keys import DropKey, DropKeyError
from chalicelib.ingest import engine
from chalicelib.ingest.chunk import resolve_chunking_strategy
from chalicelib.ingest.messages import FileMessage
from chalicelib.store import attachments, blobs, drop_errors, drop_objects, ingest_jobs, tenants, vector_stores
from chalicelib.store import files as file_rows
from chalicelib.store.drop_objects import DropObject
from chalicelib.store.vector_stores import VectorStore

logger = logging.getLogger("engram.events")

# Longest store name a key may create (the API's limit, chalicelib/api/schemas.py MAX_NAME_CHARS).
MAX_STORE_NAME_CHARS = 256
# Serialises the creation of a store by name within a tenant (two files dropped at once into a new store).
_STORE_NAME_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def apply(delivery: Delivery, embedder: Embedder, record: S3Record) -> str:
    """Apply one S3 event record; returns what happened (``staged``, ``deleted``, ``attributes``, ``stale``,
    ``duplicate``, ``internal``, ``ignored``, ``refused`` (the tenant's drop folder is off), ``error`` or a
    :func:`chalicelib.ingest.engine.stage` outcome).

    Raises:
        UpstreamError: S3, SQS or the database failed (the message is retried).
    """
    from chalicelib.store.db import pool, tenant_connection

    settings = delivery.settings
    if s3_keys.is_internal(record.key):
        return "internal"
    if not (record.is_created or record.is_removed):
        return "ignored"
    try:
        key = s3_keys.parse(record.key)
    except DropKeyError as exc:
        with pool(settings).connection() as owner:
            _error(owner, None, record, exc.code, exc.message)
        return "error"
    with tenant_connection(settings, key.tenant) as conn:
        if drop_objects.tenant_exists(conn, key.tenant):
            if not tenants.drop_folder_enabled(conn, key.tenant):
                _error(conn, key.tenant, record, "drop_folder_disabled",
                       f"The drop folder of tenant {key.tenant!r} is disabled: nothing was ingested, changed or "
                       f"deleted (`engram tenants drop-folder {key.tenant} --enable` turns it on).")
                return "refused"
            if key.is_sidecar or record.is_removed:
                done = _apply_sidecar(conn, settings, key, record) if key.is_sidecar else _remove(conn, key, record)
                _sync_index(conn, settings, key.tenant)  # new attributes or a removed file reach a backend's points
                return done
            accepted = _accept(conn, settings, embedder, key, record)
            if isinstance(accepted, str):
                return accepted
            return engine.stage(conn, delivery, embedder, accepted)
    with pool(settings).connection() as owner:
        _error(owner, key.tenant, record, "unknown_tenant",
               f"No tenant named {key.tenant!r}: the first segment of a drop-folder key must be a tenant.")
    return "error"


def give_up(settings: Settings, record: S3Record, error: BaseException) -> None:
    """The last receive of ``record`` failed: fail the version it started (the file shows ``last_error``), or, if it
    never got that far, leave a ``drop_errors`` row."""
    from chalicelib.store.db import pool, tenant_connection

    if isinstance(error, engine.VersionFailedError):
        return  # its file already shows the failure (last_error); the message waits in the dead-letter queue
    try:
        key = s3_keys.parse(record.key)
    except DropKeyError:
        return
    last_error = engine.error_of(error)
    with pool(settings).connection() as owner:
        if not drop_objects.tenant_exists(owner, key.tenant):
            return
    with tenant_connection(settings, key.tenant) as conn:
        row = drop_objects.get(conn, key.tenant, record.bucket, key.key)
        # A version was opened for this very event: fail it (the file shows last_error).
        if (row is not None and row.version is not None and row.vector_store_id is not None
                and row.file_id is not None and _order(record, row) == 0
                and engine.fail_version(conn, key.tenant, row.vector_store_id, row.file_id, row.version, error)):
            return
        _error(conn, key.tenant, record, "ingest_failed", f"{last_error['code']}: {last_error['message']}")


def _accept(conn: psycopg.Connection, settings: Settings, embedder: Embedder, key: DropKey,
            record: S3Record) -> FileMessage | str:
    """Record a created object under its row lock and claim a version for it; the version to stage, or what
    happened instead."""
    try:
        with conn.transaction():
            row = drop_objects.lock(conn, key.tenant, record.bucket, key.key)
            order = _order(record, row)
            if order < 0:
                return "stale"
            if order == 0:
                if row.version is None or row.file_id is None or row.vector_store_id is None:
                    return "duplicate"
                return FileMessage(key.tenant, row.vector_store_id, row.file_id, row.version)
            store = _store(conn, key, embedder, settings.vector_backend)
            _check_size(conn, settings, key, record)
            side = drop_objects.get(conn, key.tenant, record.bucket, key.sidecar_key)
            attributes = side.attributes if side is not None and not side.deleted and side.attributes else {}
            file_id = _file(conn, row, key, record)
            try:  # the API's check (attach.attach_all); refusing rolls the new file back with the transaction
                tenants.check_store_capacity(conn, key.tenant, store.id, [file_id], record.size, param="key")
            except InvalidRequestError as exc:
                raise _DropError(exc.code or "invalid_request", exc.message) from None
            strategy = resolve_chunking_strategy(None, embedder_max_tokens=embedder.max_input_tokens)
            attachments.attach(conn, key.tenant, store.id, file_id, attributes=attributes,
                               chunking_strategy=strategy.to_openai())
            version = ingest_jobs.start(conn, key.tenant, store.id, file_id, lease_s=settings.processing_lease_s,
                                        max_attempts=settings.processing_max_attempts,
                                        source=(record.bucket, key.key, record.etag))
            if version is None:  # cannot happen right after attaching; refuse loudly rather than lose the drop
                raise ConflictError(f"Could not claim {file_id} in {store.id} right after attaching it.")
            drop_objects.save(conn, dataclasses.replace(
                row, vector_store_id=store.id, file_id=file_id, version=version, etag=record.etag,
                sequencer=record.sequencer, event_time=record.event_time, deleted=False))
            vector_stores.touch(conn, key.tenant, [store])
    except _DropError as exc:
        _error(conn, key.tenant, record, exc.code, exc.message)
        return "error"
    return FileMessage(key.tenant, store.id, file_id, version)


def _sync_index(conn: psycopg.Connection, settings: Settings, tenant: str) -> None:
    """The vector backends' after-write hook for what the change queued for the tenant's stores."""
    from chalicelib.search.backends import sync

    sync.after_write(conn, settings, tenant_id=tenant)


def _remove(conn: psycopg.Connection, key: DropKey, record: S3Record) -> str:
    with conn.transaction():
        row = drop_objects.lock(conn, key.tenant, record.bucket, key.key)
        order = _order(record, row)
        if order <= 0:
            return "stale" if order < 0 else "duplicate"
        if row.file_id is not None:
            file_rows.delete_file(conn, key.tenant, row.file_id)
        drop_objects.save(conn, dataclasses.replace(
            row, file_id=None, version=None, etag=record.etag, sequencer=record.sequencer,
            event_time=record.event_time, deleted=True))
    return "deleted"


def _apply_sidecar(conn: psycopg.Connection, settings: Settings, key: DropKey, record: S3Record) -> str:
    attributes = None
    if record.is_created:
        data = blobs.read_object(record.bucket, key.key, record.etag, region=settings.aws_region)
        if data is None:
            return "stale"  # overwritten or deleted since: the newer event carries the change
        try:
            attributes = sidecar.parse(data)
        except InvalidRequestError as exc:
            _error(conn, key.tenant, record, exc.code or "invalid_metadata", exc.message)
            return "error"
    with conn.transaction():
        target = drop_objects.lock(conn, key.tenant, record.bucket, key.target_key)  # the file's row first, always
        side = drop_objects.lock(conn, key.tenant, record.bucket, key.key)
        order = _order(record, side)
        if order <= 0:
            return "stale" if order < 0 else "duplicate"
        drop_objects.save(conn, dataclasses.replace(
            side, etag=record.etag, sequencer=record.sequencer, event_time=record.event_time,
            deleted=record.is_removed, attributes=attributes))
        if target.file_id is not None and target.vector_store_id is not None and not target.deleted:
            try:
                attachments.update_attributes(conn, key.tenant, target.vector_store_id, target.file_id,
                                              attributes or {})
            except NotFoundError:
                pass  # detached meanwhile; the next drop of the file picks the sidecar up
    return "attributes"


class _DropError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _store(conn: psycopg.Connection, key: DropKey, embedder: Embedder, backend: str) -> VectorStore:
    """The store the key names, created by name when missing.

    Raises:
        _DropError: an unknown ``vs_`` id, another tenant's shared store, an ambiguous or over-long name, another
            embedding model, expired.
    """
    if len(key.store) > MAX_STORE_NAME_CHARS:
        raise _DropError("invalid_key", f"Vector store names are at most {MAX_STORE_NAME_CHARS} characters.")
    conn.execute(_STORE_NAME_LOCK, (f"engram-store:{key.tenant}/{key.store}",))
    try:
        store = vector_stores.find(conn, key.tenant, key.store)
    except ConflictError as exc:
        raise _DropError("ambiguous_store", exc.message) from None
    except PermissionDeniedError as exc:  # another tenant's shared store: readable, never written to
        raise _DropError(exc.code or vector_stores.READ_ONLY_CODE, exc.message) from None
    if store is None:
        if key.store.startswith(ids.VECTOR_STORE):
            raise _DropError("store_not_found", f"No vector store {key.store!r} in tenant {key.tenant!r} "
                                                "(a segment starting with 'vs_' names an existing store by id).")
        store = vector_stores.create(conn, key.tenant, name=key.store, model=embedder.model, dim=embedder.dimension,
                                     backend=backend)
    try:
        vector_stores.check_embedding(store, embedder.model, embedder.dimension)
    except EmbeddingMismatchError as exc:
        raise _DropError(exc.code or "embedding_model_mismatch", exc.message) from None
    if vector_stores.is_expired(store, datetime.now(UTC)):
        raise _DropError("vector_store_expired", f"Vector store {store.id} has expired.")
    return store


def _check_size(conn: psycopg.Connection, settings: Settings, key: DropKey, record: S3Record) -> None:
    """Refuse an object larger than the tenant may upload (:func:`chalicelib.store.tenants.max_file_bytes`, the
    check of the API's uploads).

    Raises:
        _DropError: ``file_too_large``.
    """
    limit, source = tenants.max_file_bytes(conn, key.tenant, settings.max_file_bytes)
    if record.size > limit:
        raise _DropError("file_too_large", f"{key.path} is {record.size:,} bytes; {source} is {limit:,} bytes.")
    from chalicelib.ingest import parse

    too_large = parse.refusal_by_size(key.path, record.size, parse.ParseLimits.from_settings(settings))
    if too_large is not None:
        raise _DropError("file_too_large", f"{too_large}; ingestion would refuse it.")


def _file(conn: psycopg.Connection, row: DropObject, key: DropKey, record: S3Record) -> str:
    """The id of the file the object is: the one it became before (bytes re-pointed), or a new one."""
    if row.file_id is not None:
        try:
            file_rows.point_to_object(conn, key.tenant, row.file_id, bucket=record.bucket, key=key.key,
                                      size=record.size)
            return row.file_id
        except NotFoundError:
            pass  # deleted through the API since
    return file_rows.create_object_file(conn, key.tenant, filename=key.path, bucket=record.bucket, key=key.key,
                                        size=record.size).id


def _order(record: S3Record, row: DropObject) -> int:
    """-1, 0 or 1 as ``record`` is older than, the same event as, or newer than the newest event applied to the
    key. Without sequencers (moto, and synced records) the event time decides, then ETag and kind (a different one
    counts as newer). A synced record (:mod:`chalicelib.events.sync`) with the ETag and kind last applied is that
    same event, whatever the times: a sync racing the event never applies it twice. Its time is taken just before
    the HEAD that saw the object, so an event S3 completed before that HEAD is older and one completed after it is
    newer."""
    if row.sequencer is None and row.event_time is None:
        return 1
    same = record.etag == row.etag and record.is_removed == row.deleted
    if record.synced and same:
        return 0
    if record.sequencer and row.sequencer:
        return compare_sequencers(record.sequencer, row.sequencer)
    if record.event_time and row.event_time and record.event_time != row.event_time:
        return 1 if record.event_time > row.event_time else -1
    return 0 if same else 1


def _error(conn: psycopg.Connection, tenant: str | None, record: S3Record, code: str, message: str) -> None:
    logger.warning("drop s3://%s/%s: %s: %s", record.bucket, record.key, code, message)
    drop_errors.record(conn, tenant_id=tenant, bucket=record.bucket, key=record.key, event=record.event_id,
                       code=code, message=message)
