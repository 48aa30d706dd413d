"""The drop folder as a data source: bringing each store to match its bucket, as Bedrock Knowledge Bases sync
theirs (an ingestion job counting what it scanned, and what was new, modified, deleted or failed).

S3 event notifications can be missed: a SIGKILLed local stack loses the ones still queued, and on AWS a notification
that is misconfigured, removed or dropped delivers nothing. A sync repairs what they missed. For a tenant (or one
of its stores), the objects under ``<tenant>/`` (or ``<tenant>/<store name>/`` and ``<tenant>/<store id>/``) are
listed with ListObjectsV2, in key order, next to the ``drop_objects`` rows of the same key range
(:func:`chalicelib.store.drop_objects.in_range`):

- an object whose row holds its ETag (not deleted) is ``unchanged``: nothing is read, sent, written or embedded;
- an object without an applied row (or whose row says deleted) is ``new``; one whose row holds another ETag
  ``modified``; a row whose object is gone is ``deleted``; an object that cannot be applied as it is (a key that
  names no file, or one a sync already failed to apply at this ETag: a ``drop_errors`` row) is ``failed``, and is
  tried again;
- each difference is confirmed with a HEAD of the object (what it is now, not what the listing said: an object
  written after the listing is never removed) and handed to the ingestion path as a ``drop.object`` message
  (:mod:`chalicelib.events.synced`), which the ingest handler applies exactly as an S3 event
  (:func:`chalicelib.events.drop.apply`).

Racing events: the message carries the time taken just before its HEAD. Applied under the key's row lock, it counts
as the same event as an applied one with its ETag and kind (a duplicate: nothing happens twice), as older than an
event S3 completed after that HEAD and as newer than one completed before it (:func:`chalicelib.events.drop._order`).

A run is bounded: it stops when ``out_of_time()`` says so and returns a cursor (tenant, prefix, last key done) that
the next run resumes from; ``checkpoint`` saves it after every page. Work repeated after a kill changes nothing
(the messages are idempotent).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chalicelib import aws
from chalicelib.config import Settings
from chalicelib.dispatch.port import Dispatcher
from chalicelib.errors import InvalidRequestError, UpstreamError
from chalicelib.events import s3_keys, synced
from chalicelib.events.s3_keys import DropKeyError
from chalicelib.store import drop_errors, drop_objects, tenants
from chalicelib.store.drop_objects import DropObject

__all__ = ["COUNTS", "PAGE_KEYS", "Scope", "SyncResult", "run", "scope", "zero_counts"]

logger = logging.getLogger("engram.events")

# What a run counts (the keys of SyncResult.counts, in this order).
COUNTS = ("scanned", "new", "modified", "deleted", "unchanged", "failed")
# Keys per ListObjectsV2 page (S3's maximum) and rows read per page of the key range.
PAGE_KEYS = 1000
# HEAD answers meaning "no such object".
_GONE = ("404", "NoSuchKey", "NotFound")


def zero_counts() -> dict[str, int]:
    """``{count: 0}`` for every name of :data:`COUNTS`."""
    return dict.fromkeys(COUNTS, 0)


@dataclass(frozen=True, slots=True)
class Scope:
    """What one sync covers: the ``tenant``, the store it is limited to (``store_id``, or None for every store) and
    the key ``prefixes`` it lists (each ends with ``/``)."""

    tenant: str
    store_id: str | None
    prefixes: tuple[str, ...]


@dataclass(slots=True)
class SyncResult:
    """A run's ``counts`` (:data:`COUNTS`) and ``cursor``: None when the pass is complete, else where the next run
    resumes (``{"tenant", "prefix" (index into the scope's prefixes), "after" (the last key done)}``)."""

    counts: dict[str, int] = field(default_factory=zero_counts)
    cursor: dict[str, Any] | None = None


def scope(settings: Settings, tenant: str, store: str | None = None) -> Scope:
    """The scope of a sync of ``tenant``'s drop folder, or of its store ``store`` (a name or ``vs_`` id). A name
    the database does not know yet but the bucket holds objects under (``<tenant>/<store>/``: the drop events that
    would have created the store were lost) is synced as that prefix: the objects' events create the store.

    Raises:
        InvalidRequestError: no drop bucket is configured (``drop_folder_not_configured``), no such tenant
            (``tenant_not_found``), the tenant's drop folder is off (``drop_folder_disabled``), no such store
            (``store_not_found``, param ``vector_store``).
        ConflictError: several of the tenant's stores have that name (use the id).
        PermissionDeniedError: the id of another tenant's shared store.
    """
    from chalicelib.store import vector_stores
    from chalicelib.store.db import tenant_connection

    if not settings.bucket:
        raise InvalidRequestError("This deployment has no drop folder: set ENGRAM_BUCKET (the drop bucket) to sync "
                                  "one.", code="drop_folder_not_configured")
    with tenant_connection(settings, tenant) as conn:
        if not drop_objects.tenant_exists(conn, tenant):
            raise InvalidRequestError(f"No tenant named {tenant!r}.", param="tenant", code="tenant_not_found")
        if not tenants.drop_folder_enabled(conn, tenant):
            raise InvalidRequestError(f"The drop folder of tenant {tenant!r} is disabled: there is nothing to sync "
                                      f"(`engram tenants drop-folder {tenant} --enable` turns it on).",
                                      code="drop_folder_disabled")
        if store is None:
            return Scope(tenant, None, (f"{tenant}/",))
        found = vector_stores.find(conn, tenant, store)
    if found is None:
        prefix = f"{tenant}/{store}/"
        if "/" not in store and _holds_objects(settings, prefix):
            return Scope(tenant, None, (prefix,))
        raise InvalidRequestError(f"No vector store {store!r} in this tenant, and nothing under "
                                  f"s3://{settings.bucket}/{prefix} in the drop folder: name a store by its name or "
                                  "id.",
                                  param="vector_store", code="store_not_found")
    names = [found.id] + ([found.name] if found.name and "/" not in found.name and found.name != found.id else [])
    return Scope(tenant, found.id, tuple(f"{tenant}/{name}/" for name in names))


def run(settings: Settings, dispatcher: Dispatcher, *, tenant: str | None = None, store: str | None = None,
        cursor: dict[str, Any] | None = None, out_of_time: Callable[[], bool] = lambda: False,
        checkpoint: Callable[[dict[str, Any] | None], None] = lambda cursor: None) -> SyncResult:
    """Sync ``tenant``'s drop folder (or its store ``store``), or every tenant's whose drop folder is on (``tenant``
    None), from ``cursor`` on, sending the differences through ``dispatcher``; stops early when ``out_of_time()``.

    Raises:
        InvalidRequestError / ConflictError / PermissionDeniedError: see :func:`scope` (for an explicit
            ``tenant``); ``store`` without ``tenant``.
        UpstreamError: listing the bucket or sending the messages failed (the run resumes from its last
            checkpoint).
    """
    result = SyncResult()
    if tenant is not None:
        return _Run(settings, dispatcher, scope(settings, tenant, store), result, out_of_time, checkpoint).walk(cursor)
    if store is not None:
        raise InvalidRequestError("A store is named within a tenant: give the tenant too.", param="tenant")
    if not settings.bucket:
        return result
    start = (cursor or {}).get("tenant")
    for name in _tenants(settings):
        if start is not None and name < start:
            continue
        try:
            found = scope(settings, name)
        except InvalidRequestError:
            continue  # its drop folder is off (or it was just deleted)
        _Run(settings, dispatcher, found, result, out_of_time, checkpoint).walk(cursor if name == start else None)
        if result.cursor is not None:
            return result
    return result


def _holds_objects(settings: Settings, prefix: str) -> bool:
    """Whether the drop bucket holds any object under ``prefix``.

    Raises:
        UpstreamError: S3 failed.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        page = aws.client("s3", settings.aws_region).list_objects_v2(Bucket=settings.bucket, Prefix=prefix,
                                                                      MaxKeys=1)
    except (BotoCoreError, ClientError) as exc:
        raise UpstreamError(f"Listing s3://{settings.bucket}/{prefix} failed: {str(exc)[:300]}") from exc
    return bool(page.get("KeyCount") or page.get("Contents"))


def _tenants(settings: Settings) -> list[str]:
    from chalicelib.store import blob_refs
    from chalicelib.store.db import pool

    with pool(settings).connection() as conn:
        return sorted(blob_refs.tenants(conn))


def _utf8(key: str) -> bytes:
    """S3's listing order (and ``COLLATE "C"``'s): UTF-8 bytes."""
    return key.encode("utf-8", "surrogatepass")


@dataclass(slots=True)
class _Run:
    """One scope's walk, adding to ``result``."""

    settings: Settings
    dispatcher: Dispatcher
    scope: Scope
    result: SyncResult
    out_of_time: Callable[[], bool]
    checkpoint: Callable[[dict[str, Any] | None], None]

    @property
    def bucket(self) -> str:
        return self.settings.bucket or ""

    def walk(self, cursor: dict[str, Any] | None) -> SyncResult:
        """Every prefix of the scope from ``cursor`` on; sets ``result.cursor`` when it stops early."""
        first = int((cursor or {}).get("prefix", 0))
        for index in range(first, len(self.scope.prefixes)):
            after = str((cursor or {}).get("after") or "") if index == first else ""
            stopped = self._prefix(index, after)
            if stopped is not None:
                self.result.cursor = {"tenant": self.scope.tenant, "prefix": index, "after": stopped}
                return self.result
            if index + 1 < len(self.scope.prefixes) and self.out_of_time():
                self.result.cursor = {"tenant": self.scope.tenant, "prefix": index + 1, "after": ""}
                return self.result
        return self.result

    def _prefix(self, index: int, after: str) -> str | None:
        """Walk one prefix after key ``after``, page by page; returns the last key done when out of time, None when
        the prefix is done."""
        prefix, tenant = self.scope.prefixes[index], self.scope.tenant
        while True:
            contents, truncated = self._list(prefix, after)
            upto = contents[-1]["Key"] if truncated and contents else None
            rows, upto, failed_before = self._rows(prefix, after, upto, contents)
            listed = {item["Key"]: item for item in contents
                      if not s3_keys.is_internal(item["Key"]) and (upto is None or _utf8(item["Key"]) <= _utf8(upto))}
            keys = sorted(set(listed) | {key for key, row in rows.items() if row.is_live}, key=_utf8)
            messages: list[synced.ObjectMessage] = []
            stopped = None
            for position, key in enumerate(keys):
                outcome = self._examine(key, listed.get(key), rows.get(key), failed_before)
                if outcome is not None:
                    self.result.counts[outcome[0]] += 1
                    if outcome[1] is not None:
                        messages.append(outcome[1])
                if position + 1 < len(keys) and self.out_of_time():
                    stopped = key
                    break
            self._send(messages)
            if stopped is not None:
                self.checkpoint({"tenant": tenant, "prefix": index, "after": stopped})
                return stopped
            if upto is None:
                return None
            after = upto
            self.checkpoint({"tenant": tenant, "prefix": index, "after": after})
            if self.out_of_time():
                return after

    def _rows(self, prefix: str, after: str, upto: str | None, contents: list[dict[str, Any]]
              ) -> tuple[dict[str, DropObject], str | None, set[str]]:
        """The rows of the page's key range (``after``, ``upto``], the range's end (earlier than ``upto`` when the
        range holds more rows than a page), and the listed keys a sync failed to apply at their listed ETag."""
        from chalicelib.store.db import tenant_connection

        tenant = self.scope.tenant
        with tenant_connection(self.settings, tenant) as conn:
            rows = drop_objects.in_range(conn, tenant, self.bucket, prefix, after=after, upto=upto, limit=PAGE_KEYS)
            if len(rows) == PAGE_KEYS:  # more rows than a page: this page ends at the last row read
                upto = rows[-1].key
            by_key = {row.key: row for row in rows}
            changed = {item["Key"]: _etag(item) for item in contents
                       if not _same(by_key.get(item["Key"]), _etag(item))}
            return by_key, upto, drop_errors.failed_at(conn, self.bucket, changed)

    def _list(self, prefix: str, after: str) -> tuple[list[dict[str, Any]], bool]:
        """One ListObjectsV2 page of ``prefix`` after key ``after``: ``(contents, truncated)``.

        Raises:
            UpstreamError: S3 failed.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": PAGE_KEYS}
        if after:
            kwargs["StartAfter"] = after
        try:
            page = aws.client("s3", self.settings.aws_region).list_objects_v2(**kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise UpstreamError(f"Listing s3://{self.bucket}/{prefix} failed: {str(exc)[:300]}") from exc
        return list(page.get("Contents") or []), bool(page.get("IsTruncated"))

    def _examine(self, key: str, item: dict[str, Any] | None, row: DropObject | None,
                 failed: set[str]) -> tuple[str, synced.ObjectMessage | None] | None:
        """What one key of the page is: ``(count, message to send or None)``, or None when it is not counted (a row
        whose object reappeared unchanged since the listing)."""
        live = row is not None and row.is_live
        if item is not None:
            self.result.counts["scanned"] += 1
            if _same(row, _etag(item)):
                return "unchanged", None
            try:
                s3_keys.parse(key)
            except DropKeyError as exc:
                self._error(key, _etag(item), exc)
                return "failed", None
        observed = datetime.now(UTC)  # before the HEAD: see the module docstring
        try:
            head = self._head(key)
        except UpstreamError as exc:
            logger.warning("sync s3://%s/%s: %s", self.bucket, key, exc.message)
            return "failed", None
        if head is None:
            if live:
                return "deleted", self._message(key, synced.REMOVED, "", 0, observed)
            return ("unchanged", None) if item is not None else None
        etag, size = head
        if _same(row, etag):
            return ("unchanged", None) if item is not None else None
        message = self._message(key, synced.CREATED, etag, size, observed)
        if item is not None and key in failed and _etag(item) == etag:
            return "failed", message  # it failed at this ETag before: tried again, counted as failed
        return ("modified" if live else "new"), message

    def _error(self, key: str, etag: str, error: DropKeyError) -> None:
        """Record (once per ETag) that a listed key names no file, as its S3 event would have."""
        from chalicelib.store.db import tenant_connection

        logger.warning("sync s3://%s/%s: %s: %s", self.bucket, key, error.code, error.message)
        with tenant_connection(self.settings, self.scope.tenant) as conn:
            drop_errors.record(conn, tenant_id=self.scope.tenant, bucket=self.bucket, key=key,
                               event=drop_errors.SYNCED_EVENT + etag, code=error.code, message=error.message)

    def _head(self, key: str) -> tuple[str, int] | None:
        """``(etag, size)`` of the object now, or None when there is none.

        Raises:
            UpstreamError: S3 failed otherwise.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = aws.client("s3", self.settings.aws_region).head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in _GONE:
                return None
            raise UpstreamError(f"HEAD s3://{self.bucket}/{key} failed: {str(exc)[:300]}") from exc
        except BotoCoreError as exc:
            raise UpstreamError(f"HEAD s3://{self.bucket}/{key} failed: {str(exc)[:300]}") from exc
        return str(found.get("ETag") or "").strip('"'), int(found.get("ContentLength") or 0)

    def _message(self, key: str, event: str, etag: str, size: int, observed: datetime) -> synced.ObjectMessage:
        return synced.ObjectMessage(tenant=self.scope.tenant, bucket=self.bucket, key=key, event=event, etag=etag,
                                    size=size, observed=observed.isoformat())

    def _send(self, messages: Sequence[synced.ObjectMessage]) -> None:
        if messages:
            self.dispatcher.send(messages)
            logger.info("sync %s: %d object(s) sent to the ingestion path", self.scope.tenant, len(messages))


def _etag(item: dict[str, Any]) -> str:
    return str(item.get("ETag") or "").strip('"')


def _same(row: DropObject | None, etag: str) -> bool:
    """Whether ``row`` says the object is live at ``etag`` (the store holds it as it is)."""
    return row is not None and row.is_live and row.etag == etag
