"""Prefixed object ids, generated and validated in one place.

Prefixes follow OpenAI's wire contract (``../shared/reference/OPENAI-COMPAT.md`` §0): files ``file-``, vector stores
``vs_``, file batches ``vsfb_``, responses ``resp_``, messages ``msg_``, file-search calls ``fs_``, conversations
``conv_``; Engram's own: memories ``mem_``, asynchronous memory adds ``memjob_``, agent profiles ``agent_``.
The body is 24 characters of ``[0-9A-Za-z]``: 10 encode the creation time in microseconds (base 62, digits before
capitals before lower case, so ids compare in creation order under byte-wise ``COLLATE "C"`` ordering, which cursor
pagination relies on) and 14 are random (≈83 bits). Within one process ids are strictly increasing.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

from chalicelib.errors import InvalidRequestError

FILE = "file-"
VECTOR_STORE = "vs_"
FILE_BATCH = "vsfb_"
RESPONSE = "resp_"
MESSAGE = "msg_"
FILE_SEARCH_CALL = "fs_"
UPLOAD = "upload_"
UPLOAD_PART = "part_"
API_KEY = "key_"
# Engram's own objects.
MEMORY = "mem_"
MEMORY_JOB = "memjob_"
CONVERSATION = "conv_"
AGENT = "agent_"
EXCHANGE = "exch_"
MEMORY_SEARCH_CALL = "msc_"
MCP_LIST_TOOLS = "mcpl_"  # the Responses API's mcp tool items (OpenAI's prefixes)
MCP_CALL = "mcp_"
MCP_APPROVAL_REQUEST = "mcpr_"
MCP_APPROVAL_RESPONSE = "mcpa_"

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # ASCII order
_TIME_LEN = 10  # 62**10 µs ≈ 26,000 years
_RANDOM_LEN = 14
_lock = threading.Lock()
_last_us = 0
_ID_BODY = re.compile(r"^[0-9A-Za-z_-]{1,64}$")
_CURSOR_BODY = re.compile(rf"^[0-9A-Za-z]{{{_TIME_LEN + _RANDOM_LEN}}}$")


def new_id(prefix: str) -> str:
    """A fresh id such as ``vs_0Bq3...``: prefix + 10 time characters + 14 random alphanumerics; later ids of
    this process sort after earlier ones."""
    global _last_us
    with _lock:
        now = max(time.time_ns() // 1000, _last_us + 1)
        _last_us = now
    digits = []
    for _ in range(_TIME_LEN):
        now, rest = divmod(now, 62)
        digits.append(_ALPHABET[rest])
    return prefix + "".join(reversed(digits)) + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LEN))


def validate_id(value: object, prefix: str, *, param: str) -> str:
    """Return ``value`` if it is a well-formed id with ``prefix``.

    Raises:
        InvalidRequestError: (400, ``param`` set) code ``invalid_type`` when the value is not a string,
            ``invalid_value`` when it has the wrong prefix or characters no Engram id has, in OpenAI's words
            (``Invalid 'file_ids[3]': 'abc'. Expected an ID that begins with 'file'.``). Well-formed but unknown
            ids are the store's 404.
    """
    if not isinstance(value, str):
        from chalicelib.validation import invalid_type

        raise invalid_type(param, "a string", value)
    shown = value if len(value) <= 64 else value[:64] + "…"
    shown = shown.encode("unicode_escape").decode("ascii").replace("'", "\\'")
    if not value.startswith(prefix):
        raise InvalidRequestError(f"Invalid '{param}': '{shown}'. Expected an ID that begins with "
                                  f"'{prefix.rstrip('-_')}'.", param=param, code="invalid_value")
    if not _ID_BODY.match(value[len(prefix):]):
        raise InvalidRequestError(f"Invalid '{param}': '{shown}'. Expected an ID that begins with '{prefix}' and "
                                  "goes on with 1 to 64 letters, digits, '_' or '-'.", param=param,
                                  code="invalid_value")
    return value


def validate_cursor(value: str, prefix: str, *, param: str) -> str:
    """Return ``value`` if it can be a place in a list of ``prefix`` objects: an id Engram makes (``prefix`` + 10
    time and 14 random characters). Such a cursor is a position (ids sort by creation), so it keeps working after
    the object it names is deleted; anything else names no place in the list.

    Raises:
        InvalidRequestError: (400 ``invalid_value``, ``param`` set) not an Engram id of that kind.
    """
    if not _CURSOR_BODY.match(value[len(prefix):]) or not value.startswith(prefix):
        shown = value[:64].encode("unicode_escape").decode("ascii").replace("'", "\\'")
        raise InvalidRequestError(f"Invalid '{param}': '{shown}' is not the id of an object of this list (expected "
                                  f"'{prefix}' and {_TIME_LEN + _RANDOM_LEN} letters or digits).", param=param,
                                  code="invalid_value")
    return value
