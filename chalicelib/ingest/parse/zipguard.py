"""Refuse zip archives (DOCX containers) whose members would decompress to too much data (zip bombs)."""

from __future__ import annotations

import io
import zipfile

from chalicelib.errors import DocumentError
from chalicelib.ingest.parse.limits import ParseLimits, display_name, setting_of


def check_zip(data: bytes, filename: str, limits: ParseLimits) -> None:
    """Inspect the zip central directory of ``data`` without decompressing anything.

    Raises ``DocumentError`` (``invalid_file``) if ``data`` is not a zip archive, holds more than
    ``limits.max_zip_members`` members, declares more than ``limits.max_docx_uncompressed_bytes`` uncompressed
    bytes in total, or has a member of at least ``limits.ratio_min_member_bytes`` whose uncompressed/compressed
    ratio exceeds ``limits.max_compression_ratio``.

    The declared sizes can be trusted as an upper bound: Python's ``zipfile`` stops a member's output at its
    declared ``file_size`` and fails the CRC check if the data disagrees.
    """
    name = display_name(filename)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentError(f"{name} is not a valid DOCX file (it is not a readable zip archive)") from exc
    if len(members) > limits.max_zip_members:
        raise DocumentError(f"{name} has {len(members):,} zip members; the limit is {limits.max_zip_members:,} "
                            f"({setting_of('max_zip_members')})")
    total = 0
    for member in members:
        total += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size >= limits.ratio_min_member_bytes and ratio > limits.max_compression_ratio:
            raise DocumentError(
                f"{name} looks like a zip bomb: member {member.filename[:100]!r} expands {ratio:,.0f}:1 "
                f"(limit {limits.max_compression_ratio:g}:1, {setting_of('max_compression_ratio')})"
            )
    if total > limits.max_docx_uncompressed_bytes:
        raise DocumentError(
            f"{name} would expand to {total:,} bytes; the limit is {limits.max_docx_uncompressed_bytes:,} bytes "
            f"({setting_of('max_docx_uncompressed_bytes')})"
        )
