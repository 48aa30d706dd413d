"""Drop-folder object keys: ``<tenant>/<vector store name or id>/<path>`` → where the object is ingested.

S3 event notifications URL-encode the key the way HTML forms do (a space arrives as ``+``, a ``/`` inside a
segment never occurs but ``%2F`` and non-ASCII bytes arrive percent-encoded; "Event message structure", Amazon S3
User Guide: "The s3 key provides information about the bucket and object involved in the event. The object key
name value is URL encoded"), so keys are decoded with :func:`urllib.parse.unquote_plus` first.

Keys Engram writes itself into the same bucket are internal and never ingested: uploaded files' bytes under
``files/`` (:data:`chalicelib.store.files.CONTENT_PREFIX`) and upload parts under
``<tenant>/uploads/upload_<id>/part_<id>`` (:mod:`chalicelib.store.uploads`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_plus

from chalicelib.store.files import CONTENT_PREFIX

# A sidecar "<file>.metadata.json" sets the attributes of "<file>" (Amazon Bedrock Knowledge Bases convention).
SIDECAR_SUFFIX = ".metadata.json"
# Longest file name a drop becomes (the Files API's limit, chalicelib/api/routes/files.py).
MAX_PATH_CHARS = 255
_UPLOAD_PART = re.compile(r"^[^/]+/uploads/upload_[^/]+/part_[^/]+$")


class DropKeyError(Exception):
    """A key that cannot name a drop-folder file; ``code`` is recorded in ``drop_errors`` (``invalid_key``)."""

    def __init__(self, message: str, code: str = "invalid_key") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class DropKey:
    """A decoded drop-folder key: the tenant, the store (a ``vs_`` id or a name) and the path inside it, which
    becomes the file's name."""

    key: str
    tenant: str
    store: str
    path: str

    @property
    def is_sidecar(self) -> bool:
        """Whether the object is a ``<file>.metadata.json`` sidecar."""
        return self.path.endswith(SIDECAR_SUFFIX) and len(self.path) > len(SIDECAR_SUFFIX)

    @property
    def sidecar_key(self) -> str:
        """The key of this file's sidecar."""
        return self.key + SIDECAR_SUFFIX

    @property
    def target_key(self) -> str:
        """For a sidecar, the key of the file it describes (its own key otherwise)."""
        return self.key[: -len(SIDECAR_SUFFIX)] if self.is_sidecar else self.key


def decode(raw: str) -> str:
    """The object key an S3 event's URL-encoded ``s3.object.key`` names (``+`` → space, ``%XX`` → byte, UTF-8)."""
    return unquote_plus(raw)


def is_internal(key: str) -> bool:
    """Whether ``key`` (decoded) is one Engram wrote itself (file bytes, upload parts): never ingested."""
    return key.startswith(CONTENT_PREFIX) or _UPLOAD_PART.match(key) is not None


def parse(key: str) -> DropKey:
    """Split a decoded key into tenant, store and path.

    Raises:
        DropKeyError: fewer than three segments, an empty, ``.`` or ``..`` segment, a backslash or NUL (keys the
            blob store refuses), a folder marker (trailing ``/``), or a path longer than :data:`MAX_PATH_CHARS`.
    """
    if key.endswith("/"):
        raise DropKeyError(f"{key!r} is a folder marker, not a file.")
    parts = key.split("/")
    if len(parts) < 3:
        raise DropKeyError(f"Drop-folder keys look like <tenant>/<vector store name or id>/<path>; got {key!r}.")
    if "\\" in key or "\x00" in key or any(p in ("", ".", "..") for p in parts):
        raise DropKeyError(f"{key!r} has an empty, '.' or '..' segment, a backslash or a NUL character.")
    path = "/".join(parts[2:])
    if len(path) > MAX_PATH_CHARS:
        raise DropKeyError(f"The path inside the store is {len(path)} characters; the limit is {MAX_PATH_CHARS}.")
    return DropKey(key=key, tenant=parts[0], store=parts[1], path=path)
