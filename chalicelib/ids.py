"""Prefixed object ids, generated and validated in one place.

Prefixes follow OpenAI's wire contract (``../shared/reference/OPENAI-COMPAT.md`` §0): files ``file-``, vector stores
``vs_``, file batches ``vsfb_``, responses ``resp_``, messages ``msg_``, file-search calls ``fs_``.
The random part is 24 characters of ``[0-9a-zA-Z]`` (≈143 bits).
"""

from __future__ import annotations

import re
import secrets
import string

from chalicelib.errors import InvalidRequestError

FILE = "file-"
VECTOR_STORE = "vs_"
FILE_BATCH = "vsfb_"
RESPONSE = "resp_"
MESSAGE = "msg_"
FILE_SEARCH_CALL = "fs_"

_ALPHABET = string.ascii_letters + string.digits
_RANDOM_LEN = 24
_ID_BODY = re.compile(r"^[0-9A-Za-z_-]{1,64}$")


def new_id(prefix: str) -> str:
    """A fresh id such as ``vs_3kT9...`` (prefix + 24 random alphanumerics)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LEN))


def validate_id(value: object, prefix: str, *, param: str) -> str:
    """Return ``value`` if it is a well-formed id with ``prefix``.

    Raises:
        InvalidRequestError: (400, ``param`` set) when the value is not a string, has the wrong prefix or
            contains characters no Engram id has. Well-formed but unknown ids are the store's 404.
    """
    if not isinstance(value, str) or not value.startswith(prefix):
        raise InvalidRequestError(
            f"Invalid '{param}': expected an ID that begins with '{prefix}'.", param=param, code="invalid_id"
        )
    if not _ID_BODY.match(value[len(prefix):]):
        raise InvalidRequestError(f"Invalid '{param}': malformed ID.", param=param, code="invalid_id")
    return value
