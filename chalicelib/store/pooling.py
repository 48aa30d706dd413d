"""The connection pool, made to fail fast while Postgres is away and to recover at once when it is back (issue 24).

psycopg_pool's defaults made an outage cost every request 30 s and the first requests after it 30–46 s:

* ``timeout`` (30 s): a request waited that long for a connection the pool could not make;
* ``reconnect_timeout`` (300 s): a failed connection attempt was retried by the pool's workers 1, 2, 4, 8, 16 … s
  apart (psycopg_pool ``AttemptWithBackoff``) while requests waited for it, so once the database was back the pool
  only noticed at its next attempt, up to the outage's length later;
* idle connections the server had closed were handed out as they were, and failed the request that got them.

:class:`EngramPool` keeps psycopg_pool and changes three things:

* a connection attempt that fails is not retried in the background (``reconnect_timeout=0``): the next request that
  needs a connection makes the next attempt, at once, so the first request after recovery connects in milliseconds;
* :meth:`EngramPool.getconn` stops waiting as soon as an attempt made while it waits fails (the database is
  unreachable: :class:`DatabaseUnreachable`, within :data:`WAIT_SLICE_S` of a refused connection), else waits up
  to ``timeout`` (every connection busy, or a host that does not answer, whose attempts end only at
  ``connect_timeout``: ``PoolTimeout``);
* it hands out no connection the server has closed: one whose socket has something to read while idle (the server's
  goodbye: ``terminating connection ...``, or end of file) or that has been idle for :data:`CHECK_IDLE_S` is checked
  with an empty query first, and a dead one is replaced (psycopg_pool opens its replacement) and the next one taken.
  A connection in steady use costs no round trip.

Both errors are ``psycopg.OperationalError`` subclasses; the HTTP edge answers them with 503 ``database_unavailable``
and ``Retry-After`` (:func:`chalicelib.api.middleware.database_unavailable`).
"""

from __future__ import annotations

import logging
import select
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

__all__ = ["CHECK_IDLE_S", "WAIT_SLICE_S", "DatabaseUnreachable", "EngramPool"]

logger = logging.getLogger("engram.db")

# A connection idle at least this long (seconds) is checked with an empty query (one round trip) before it is handed
# out. Below it, only its socket is looked at (no round trip). 1 s: a warm Lambda between invocations, a server idle
# between bursts, are checked; a connection reused within a burst is not (HikariCP skips its check within 0.5 s).
CHECK_IDLE_S = 1.0
# How often a waiting request looks whether a connection attempt failed meanwhile (seconds): it then gives up that
# much after the failure at most.
WAIT_SLICE_S = 0.05


class DatabaseUnreachable(PoolTimeout):
    """No connection: an attempt to connect failed while the request waited (refused, timed out, authentication
    failed ...; the pool's log has the libpq message). A ``psycopg.OperationalError``."""


class EngramPool(ConnectionPool[psycopg.Connection[Any]]):
    """A ``psycopg_pool.ConnectionPool`` that fails fast and recovers at once (see the module docstring).

    Takes ConnectionPool's arguments, except ``reconnect_timeout`` (always 0: no background retries) and
    ``reconnect_failed`` (used here to learn of failed attempts). ``timeout`` (seconds) bounds :meth:`getconn`.
    """

    def __init__(self, conninfo: str = "", *, configure: Callable[[psycopg.Connection], None] | None = None,
                 reset: Callable[[psycopg.Connection], None] | None = None, **kwargs: Any) -> None:
        self._failed_at = 0.0  # time.monotonic() of the last connection attempt that failed; 0: none yet
        self._idle_since: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()
        self._idle_lock = threading.Lock()
        self._user_configure, self._user_reset = configure, reset
        super().__init__(conninfo, configure=self._configured, reset=self._returned, reconnect_timeout=0.0,
                         **kwargs)

    def _configured(self, conn: psycopg.Connection) -> None:
        """A new connection: configure it, and it starts idle now."""
        if self._user_configure is not None:
            self._user_configure(conn)
        self._mark_idle(conn)

    def _returned(self, conn: psycopg.Connection) -> None:
        """A connection given back: reset it, and it is idle from now."""
        if self._user_reset is not None:
            self._user_reset(conn)
        self._mark_idle(conn)

    def _mark_idle(self, conn: psycopg.Connection) -> None:
        with self._idle_lock:
            self._idle_since[conn] = time.monotonic()

    def reconnect_failed(self) -> None:
        """psycopg_pool calls this when a connection attempt failed and will not be retried (immediately, since
        ``reconnect_timeout`` is 0): remember when, so that waiting requests stop waiting."""
        self._failed_at = time.monotonic()
        super().reconnect_failed()

    def getconn(self, timeout: float | None = None) -> psycopg.Connection:
        """A live connection from the pool, waiting up to ``timeout`` seconds (default: the pool's ``timeout``).

        Raises:
            DatabaseUnreachable: a connection attempt failed while waiting (the database is down or unreachable).
            psycopg_pool.PoolTimeout: no connection became free in time (every one busy).
            psycopg_pool.PoolClosed: the pool is closed.
        """
        total = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + total
        while True:
            remaining = deadline - time.monotonic()
            try:
                conn: psycopg.Connection = super().getconn(timeout=max(min(remaining, WAIT_SLICE_S), 1e-3))
            except PoolTimeout:
                if self._failed_at >= started:
                    raise DatabaseUnreachable(
                        f"couldn't connect to the database ({time.monotonic() - started:.2f} s)") from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {total:.2f} sec") from None
                continue
            if self._alive(conn):
                return conn
            conn.close()
            self.putconn(conn)  # closed: psycopg_pool drops it and opens a replacement at once

    def _alive(self, conn: psycopg.Connection) -> bool:
        """Whether ``conn`` may be handed out: not closed, and — if its socket has something to read (an idle
        connection has nothing to read unless the server said goodbye) or it has been idle for
        :data:`CHECK_IDLE_S` — an empty query on it succeeds."""
        if conn.closed:
            return False
        with self._idle_lock:
            idle_since = self._idle_since.get(conn, 0.0)
        if time.monotonic() - idle_since < CHECK_IDLE_S and not _readable(conn):
            return True
        try:
            self.check_connection(conn)
        except psycopg.Error as exc:
            logger.info("replacing a dead pooled connection: %s", exc)
            return False
        return True


def _readable(conn: psycopg.Connection) -> bool:
    """Whether the connection's socket has data or an error waiting (one system call: no wait, no round trip)."""
    try:
        fd = conn.pgconn.socket
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
            return bool(poller.poll(0))
        readable, _, failed = select.select([fd], [], [fd], 0)  # Windows: no poll()
        return bool(readable or failed)
    except (OSError, psycopg.Error, ValueError):  # no socket any more: suspect; the check decides
        return True
