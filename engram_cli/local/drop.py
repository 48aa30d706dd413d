"""``engram drop``: put files into the drop bucket at ``<tenant>/<store>/<relative path>``, the layout the ingest
handler reads (a ``<file>.metadata.json`` sidecar is uploaded as it is, before the files, so it is there when its
file is ingested)."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SIDECAR_SUFFIX = ".metadata.json"  # the Bedrock Knowledge Bases convention


@dataclass(frozen=True)
class DropItem:
    """One upload: local ``path``, object ``key`` and ``name`` (the file's name in the store)."""

    path: Path
    key: str
    name: str


def plan(paths: list[Path], tenant: str, store: str) -> list[DropItem]:
    """The uploads for ``paths`` (files, folders recursively, hidden files skipped): sidecars first, then the files,
    each group in path order."""
    from engram_cli.service import collect_files

    items = [DropItem(path, f"{tenant}/{store}/{name}", name) for path, name in collect_files(paths)]
    return sorted(items, key=lambda item: (not item.name.endswith(SIDECAR_SUFFIX), item.name))


def upload(s3: Any, bucket: str, items: list[DropItem]) -> int:
    """``put_object`` every item (Content-Type guessed from the name); returns the bytes uploaded.

    Raises:
        botocore.exceptions.ClientError: the bucket refused an upload.
    """
    total = 0
    for item in items:
        data = item.path.read_bytes()
        content_type = mimetypes.guess_type(item.name)[0] or "application/octet-stream"
        s3.put_object(Bucket=bucket, Key=item.key, Body=data, ContentType=content_type)
        total += len(data)
    return total
