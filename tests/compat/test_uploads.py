"""Uploads API (``/v1/uploads``) through the official SDK: files larger than one request, sent in parts, then used
like any File (attached to a vector store and searched)."""

from __future__ import annotations

import hashlib
import io
import os
import time

import openai
import pytest

MIB = 1024 * 1024
MARKER = "The ultramarine pangolin guards the quartz lighthouse at midnight."


def _text_file(size: int) -> bytes:
    """~``size`` bytes of varied English-ish text; :data:`MARKER` only in the last few hundred bytes."""
    words = ["river", "ledger", "orbit", "cedar", "signal", "harbor", "lantern", "copper", "meadow", "vector"]
    lines, total, i = [], 0, 0
    tail = f"\n{MARKER}\n".encode()
    while total < size - len(tail):
        line = (f"Line {i}: the {words[i % 10]} and the {words[(i * 7) % 10]} met {i % 97} times near "
                f"{words[(i * 3) % 10]}.\n")
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines).encode() + tail


def _owner_conn(api_settings):
    from chalicelib.store.db import connect

    return connect(api_settings)


def test_chunked_upload_attach_and_search(client):
    data = _text_file(3 * MIB)
    upload = client.uploads.upload_file_chunked(file=data, filename="big-notes.txt", bytes=len(data),
                                                mime_type="text/plain", purpose="assistants", part_size=MIB,
                                                md5=hashlib.md5(data).hexdigest())
    assert upload.status == "completed" and upload.object == "upload" and upload.id.startswith("upload_")
    assert upload.bytes == len(data) and upload.filename == "big-notes.txt" and upload.purpose == "assistants"
    assert upload.expires_at - upload.created_at == 3600
    file = upload.file
    assert file is not None and file.id.startswith("file-") and file.bytes == len(data)
    assert file.filename == "big-notes.txt" and file.purpose == "assistants"
    assert client.files.retrieve(file.id).bytes == len(data)
    assert client.files.content(file.id).content == data

    store = client.vector_stores.create(name="uploads")
    attached = client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=file.id,
                                                          poll_interval_ms=100)
    assert attached.status == "completed", attached.last_error
    page = client.vector_stores.search(store.id, query="ultramarine pangolin quartz lighthouse", max_num_results=3)
    assert page.data and page.data[0].file_id == file.id
    assert any("ultramarine pangolin" in c.text for hit in page.data for c in hit.content)


def test_parts_are_assembled_in_the_order_given(client):
    upload = client.uploads.create(bytes=9, filename="order.txt", mime_type="text/plain", purpose="assistants")
    assert upload.status == "pending" and upload.file is None
    third = client.uploads.parts.create(upload.id, data=b"ghi")
    first = client.uploads.parts.create(upload.id, data=b"abc")
    second = client.uploads.parts.create(upload.id, data=b"def")
    assert first.object == "upload.part" and first.upload_id == upload.id and first.id.startswith("part_")
    done = client.uploads.complete(upload.id, part_ids=[first.id, second.id, third.id])
    assert done.status == "completed" and done.file.bytes == 9
    assert client.files.content(done.file.id).content == b"abcdefghi"
    assert client.files.delete(done.file.id).deleted  # the upload keeps its row; its file_id is cleared
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(done.file.id)


def test_complete_uses_only_the_named_parts(client):
    upload = client.uploads.create(bytes=4, filename="retry.txt", mime_type="text/plain", purpose="assistants")
    kept = client.uploads.parts.create(upload.id, data=b"good")
    client.uploads.parts.create(upload.id, data=b"lost")  # e.g. a re-sent part; never named
    done = client.uploads.complete(upload.id, part_ids=[kept.id])
    assert client.files.content(done.file.id).content == b"good"


def test_wrong_total_bytes(client):
    upload = client.uploads.create(bytes=10, filename="short.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"12345")
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.complete(upload.id, part_ids=[part.id])
    assert info.value.body["param"] == "part_ids"
    with pytest.raises(openai.BadRequestError):  # the helper declares the wrong size up front
        client.uploads.upload_file_chunked(file=b"abcdef", filename="x.txt", bytes=7, mime_type="text/plain",
                                           purpose="assistants")


def test_md5_mismatch(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.upload_file_chunked(file=b"payload", filename="x.txt", bytes=7, mime_type="text/plain",
                                           purpose="assistants", md5=hashlib.md5(b"other").hexdigest())
    assert info.value.status_code == 400 and info.value.body["param"] == "md5"


def test_cancel(client):
    upload = client.uploads.create(bytes=6, filename="c.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"abcdef")
    cancelled = client.uploads.cancel(upload.id)
    assert cancelled.status == "cancelled" and cancelled.file is None
    with pytest.raises(openai.BadRequestError):
        client.uploads.parts.create(upload.id, data=b"more")
    with pytest.raises(openai.BadRequestError):
        client.uploads.complete(upload.id, part_ids=[part.id])
    with pytest.raises(openai.BadRequestError):
        client.uploads.cancel(upload.id)


def test_completed_upload_takes_no_more_parts(client):
    done = client.uploads.upload_file_chunked(file=b"abc", filename="x.txt", bytes=3, mime_type="text/plain",
                                              purpose="assistants")
    with pytest.raises(openai.BadRequestError):
        client.uploads.parts.create(done.id, data=b"abc")
    with pytest.raises(openai.BadRequestError):
        client.uploads.complete(done.id, part_ids=[])


def test_parts_are_deleted_once_final(client, api_settings):
    from chalicelib import deps

    upload = client.uploads.create(bytes=3, filename="x.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"abc")
    blobs = deps.blob_store(api_settings)
    key = f"acme/uploads/{upload.id}/{part.id}"
    assert blobs.get(key) == b"abc"
    client.uploads.complete(upload.id, part_ids=[part.id])
    from chalicelib.store.blobs import BlobNotFoundError

    with pytest.raises(BlobNotFoundError):
        blobs.get(key)


def test_unknown_and_foreign_ids(client, make_client, api_settings):
    missing = "upload_" + "0" * 24
    with pytest.raises(openai.NotFoundError):
        client.uploads.parts.create(missing, data=b"x")
    with pytest.raises(openai.NotFoundError):
        client.uploads.complete(missing, part_ids=[])
    with pytest.raises(openai.NotFoundError):
        client.uploads.cancel(missing)
    with pytest.raises(openai.BadRequestError):  # not an upload id at all
        client.uploads.cancel("file-abc")

    upload = client.uploads.create(bytes=3, filename="mine.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"abc")
    other = make_client("other")
    with pytest.raises(openai.NotFoundError):
        other.uploads.parts.create(upload.id, data=b"abc")
    with pytest.raises(openai.NotFoundError):
        other.uploads.complete(upload.id, part_ids=[part.id])
    with pytest.raises(openai.NotFoundError):
        other.uploads.cancel(upload.id)
    # Another tenant's part cannot be completed into one's own upload either.
    theirs = other.uploads.create(bytes=3, filename="theirs.txt", mime_type="text/plain", purpose="assistants")
    with pytest.raises(openai.BadRequestError) as info:
        other.uploads.complete(theirs.id, part_ids=[part.id])
    assert info.value.body["param"] == "part_ids[0]"
    assert client.uploads.complete(upload.id, part_ids=[part.id]).status == "completed"

    # Row-level security: as tenant "other", even an unfiltered query sees none of acme's uploads or parts.
    from chalicelib.store.db import tenant_connection

    with tenant_connection(api_settings, "other") as conn:
        seen = {r[0] for r in conn.execute("SELECT tenant_id FROM uploads UNION SELECT tenant_id FROM upload_parts")}
    assert seen == {"other"}


def test_bad_requests(client, api_settings):
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.create(bytes=3, filename="x.txt", mime_type="text/plain", purpose="nonsense")
    assert info.value.body["param"] == "purpose"
    with pytest.raises(openai.BadRequestError):
        client.uploads.create(bytes=-1, filename="x.txt", mime_type="text/plain", purpose="assistants")
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.create(bytes=3, filename="x.txt", mime_type="text/plain", purpose="assistants",
                              expires_after={"anchor": "created_at", "seconds": 5})
    assert info.value.body["param"] == "expires_after.seconds"
    with pytest.raises(openai.APIStatusError) as too_big:
        client.uploads.create(bytes=api_settings.max_file_bytes + 1, filename="x.txt", mime_type="text/plain",
                              purpose="assistants")
    assert too_big.value.status_code == 413

    upload = client.uploads.create(bytes=3, filename="x.txt", mime_type="text/plain", purpose="assistants")
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.complete(upload.id, part_ids=["part_" + "0" * 24])
    assert info.value.body["param"] == "part_ids[0]"
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.complete(upload.id, part_ids=["nope"])
    assert info.value.body["param"] == "part_ids[0]"
    part = client.uploads.parts.create(upload.id, data=b"abc")
    with pytest.raises(openai.BadRequestError):
        client.uploads.complete(upload.id, part_ids=[part.id, part.id])
    with pytest.raises(openai.BadRequestError):  # larger than the whole upload
        client.uploads.parts.create(upload.id, data=b"abcd")
    with pytest.raises(openai.BadRequestError):
        client.uploads.parts.create(upload.id, data=b"")


def test_part_larger_than_a_request(client, api_settings):
    upload = client.uploads.create(bytes=api_settings.max_request_bytes + MIB, filename="x.bin",
                                   mime_type="application/octet-stream", purpose="assistants")
    with pytest.raises(openai.APIStatusError) as info:
        client.uploads.parts.create(upload.id, data=os.urandom(api_settings.max_request_bytes + 1))
    assert info.value.status_code == 413


def test_file_expires_after(client):
    upload = client.uploads.create(bytes=3, filename="e.txt", mime_type="text/plain", purpose="assistants",
                                   expires_after={"anchor": "created_at", "seconds": 7200})
    part = client.uploads.parts.create(upload.id, data=b"abc")
    done = client.uploads.complete(upload.id, part_ids=[part.id])
    assert done.file.expires_at is not None and 7190 <= done.file.expires_at - done.file.created_at <= 7210


def test_expired_upload(client, api_settings):
    from chalicelib.store import uploads

    upload = client.uploads.create(bytes=3, filename="late.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"abc")
    with _owner_conn(api_settings) as conn:
        conn.execute("UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = %s", (upload.id,))
        assert uploads.get(conn, "acme", upload.id).status == "expired"
    with pytest.raises(openai.BadRequestError) as info:
        client.uploads.parts.create(upload.id, data=b"abc")
    assert "expired" in info.value.message
    with pytest.raises(openai.BadRequestError):
        client.uploads.complete(upload.id, part_ids=[part.id])
    with _owner_conn(api_settings) as conn:
        from chalicelib import deps

        assert uploads.sweep_expired(conn, deps.blob_store(api_settings)) >= 1
        assert conn.execute("SELECT count(*) FROM upload_parts WHERE upload_id = %s", (upload.id,)).fetchone()[0] == 0


def _pdf_with_payload(pages: list[list[str]], payload_bytes: int) -> bytes:
    """A PDF whose pages hold ``pages`` (lines of Helvetica text) plus an embedded attachment of
    ``payload_bytes`` random (incompressible) bytes."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
        ops = "BT /F1 11 Tf 14 TL 72 740 Td " + " ".join(f"({line}) Tj T*" for line in escaped) + " ET"
        stream = DecodedStreamObject()
        stream.set_data(ops.encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    writer.add_attachment("payload.bin", os.urandom(payload_bytes))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture()
def big_files(api_settings):
    """The tenant ``acme`` may upload files up to 100 MiB (set explicitly; its default is OpenAI's 512 MB)."""
    from chalicelib.store import tenants
    from chalicelib.store.db import connect

    with connect(api_settings) as conn:
        tenants.set_limits(conn, "acme", {"max_file_size_bytes": 100 * MIB})
    yield
    with connect(api_settings) as conn:
        tenants.set_limits(conn, "acme", {"max_file_size_bytes": None})


@pytest.mark.slow
def test_fifty_megabyte_pdf(client, tmp_path, big_files):
    body = ("Chapter {n}. Harbour records describe the tides, the cargo manifests and the lighthouse keepers "
            "who logged every ship that passed the northern breakwater.")
    pages = [[body.format(n=n)] * 20 for n in range(1, 6)]
    pages.append([f"Appendix. {MARKER}", "The end of the report."])
    data = _pdf_with_payload(pages, 50 * MIB)
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    assert len(data) > 50 * MIB

    started = time.monotonic()
    upload = client.uploads.upload_file_chunked(file=path, mime_type="application/pdf", purpose="assistants",
                                                part_size=8 * MIB)
    uploaded = time.monotonic()
    assert upload.status == "completed" and upload.file.bytes == len(data) and upload.file.filename == "report.pdf"
    store = client.vector_stores.create(name="big-pdf")
    attached = client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=upload.file.id,
                                                          poll_interval_ms=200)
    ingested = time.monotonic()
    assert attached.status == "completed", attached.last_error
    page = client.vector_stores.search(store.id, query="ultramarine pangolin quartz lighthouse", max_num_results=3)
    assert any("ultramarine pangolin" in c.text for hit in page.data for c in hit.content)
    print(f"\n50 MB PDF ({len(data):,} bytes, {-(-len(data) // (8 * MIB))} parts): upload {uploaded - started:.1f}s, "
          f"ingest {ingested - uploaded:.1f}s, total {time.monotonic() - started:.1f}s")


def test_a_part_deleted_behind_engrams_back_is_a_410_naming_it(client, api_settings):
    from chalicelib import deps

    upload = client.uploads.create(bytes=3, filename="x.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(upload.id, data=b"abc")
    assert deps.blob_store(api_settings).delete_prefix(f"acme/uploads/{upload.id}/{part.id}") == 1
    with pytest.raises(openai.APIStatusError) as caught:
        client.uploads.complete(upload.id, part_ids=[part.id])
    assert caught.value.status_code == 410
    assert caught.value.body["code"] == "upload_part_missing" and part.id in caught.value.body["message"]
    assert caught.value.body["param"] == "part_ids[0]"
    assert client.uploads.parts.create(upload.id, data=b"abc").id  # the upload is still pending
