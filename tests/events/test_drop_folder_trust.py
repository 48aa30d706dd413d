"""The drop folder's trust controls under moto with real Postgres (issue 15 §5): a tenant whose drop folder is off
has every event refused and nothing changed; a created object is held to the tenant's limits as the API holds
uploads and attaches (file size, files per store, storage)."""

from __future__ import annotations

import json

import pytest

from chalicelib.store.db import connect
from tests.events import state


def _errors(settings, tenant: str) -> dict[str, str]:
    with connect(settings) as conn:
        return dict(conn.execute("SELECT key, code FROM drop_errors WHERE tenant_id = %s", (tenant,)).fetchall())


def _tenant(settings, name: str, **limits: int) -> str:
    from chalicelib.store import tenants
    from chalicelib.store.vector_stores import ensure_tenant

    with connect(settings) as conn:
        ensure_tenant(conn, name)
        if limits:
            tenants.set_limits(conn, name, dict(limits))
    return name


def _cli(*args: str) -> dict:
    from typer.testing import CliRunner

    from engram_cli.main import app as cli

    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_tenant_with_its_drop_folder_off_has_every_event_refused(harness, pipeline_settings):
    tenant = _tenant(pipeline_settings, "closed")
    harness.put(f"{tenant}/docs/kept.txt", b"dropped while the folder was on")
    harness.drain()
    assert state.files(pipeline_settings)[(tenant, "docs", "kept.txt")]["status"] == "completed"
    before = {k: v for k, v in state.snapshot(pipeline_settings)["files"].items() if k[0] == tenant}

    assert _cli("tenants", "drop-folder", tenant, "--disable") == {"tenant": tenant, "drop_folder": "disabled"}
    harness.put(f"{tenant}/docs/new.txt", b"planted by whoever can write the bucket")
    harness.put(f"{tenant}/docs/kept.txt", b"an overwrite")
    harness.put(f"{tenant}/docs/kept.txt.metadata.json", b'{"metadataAttributes": {"planted": "yes"}}')
    harness.put(f"{tenant}/elsewhere/other.txt", b"a new store")
    deliveries = harness.drain()
    assert not [d for d in deliveries if d.failed_ids]  # refused, not retried
    harness.delete(f"{tenant}/docs/kept.txt")
    harness.drain()
    errors = _errors(pipeline_settings, tenant)
    assert errors == {
        f"{tenant}/docs/new.txt": "drop_folder_disabled", f"{tenant}/docs/kept.txt": "drop_folder_disabled",
        f"{tenant}/docs/kept.txt.metadata.json": "drop_folder_disabled",
        f"{tenant}/elsewhere/other.txt": "drop_folder_disabled"}
    # Nothing ingested, overwritten, re-attributed, deleted, or created.
    assert {k: v for k, v in state.snapshot(pipeline_settings)["files"].items() if k[0] == tenant} == before
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT count(*) FROM vector_stores WHERE tenant_id = %s", (tenant,)).fetchone()[0] == 1
        message = conn.execute("SELECT message FROM drop_errors WHERE key = %s",
                               (f"{tenant}/docs/new.txt",)).fetchone()[0]
    assert "disabled" in message and "nothing was ingested" in message

    assert _cli("tenants", "drop-folder", tenant, "--enable")["drop_folder"] == "enabled"
    harness.put(f"{tenant}/docs/after.txt", b"dropped once the folder is on again")
    harness.drain()
    assert state.files(pipeline_settings)[(tenant, "docs", "after.txt")]["status"] == "completed"
    assert _cli("tenants", "drop-folder", "acme") == {"tenant": "acme", "drop_folder": "enabled"}  # the default


def test_a_drop_over_the_tenants_file_size_limit_is_refused(harness, pipeline_settings):
    tenant = _tenant(pipeline_settings, "tiny-files", max_file_size_bytes=100)
    harness.put(f"{tenant}/docs/small.txt", b"under the limit")
    harness.put(f"{tenant}/docs/large.txt", b"x" * 101)
    harness.drain()
    assert _errors(pipeline_settings, tenant) == {f"{tenant}/docs/large.txt": "file_too_large"}
    files = state.files(pipeline_settings)
    assert files[(tenant, "docs", "small.txt")]["status"] == "completed"
    assert (tenant, "docs", "large.txt") not in files
    with connect(pipeline_settings) as conn:
        names = [r[0] for r in conn.execute("SELECT filename FROM files WHERE tenant_id = %s", (tenant,))]
    assert names == ["small.txt"]  # no file row for the refused object


@pytest.mark.parametrize("limit,code", [("max_files_per_store", "too_many_files"),
                                        ("max_storage_bytes", "storage_limit_exceeded")])
def test_a_drop_over_the_tenants_store_limits_is_refused(harness, pipeline_settings, limit, code):
    tenant = _tenant(pipeline_settings, f"full-{code.replace('_', '-')}")
    harness.put(f"{tenant}/docs/first.txt", b"the first file fits")
    harness.drain()
    from chalicelib.store import tenants

    with connect(pipeline_settings) as conn:
        used = conn.execute("SELECT sum(usage_bytes) FROM vector_stores WHERE tenant_id = %s", (tenant,)).fetchone()[0]
        tenants.set_limits(conn, tenant, {limit: 1 if limit == "max_files_per_store" else int(used) + 5})
    harness.put(f"{tenant}/docs/second.txt", b"the second file does not")
    harness.put(f"{tenant}/docs/first.txt", b"an overwrite of the first file is not one more file")
    harness.drain()
    errors = _errors(pipeline_settings, tenant)
    assert errors[f"{tenant}/docs/second.txt"] == code
    files = state.files(pipeline_settings)
    assert (tenant, "docs", "second.txt") not in files
    if limit == "max_files_per_store":
        assert f"{tenant}/docs/first.txt" not in errors
        assert files[(tenant, "docs", "first.txt")]["status"] == "completed"
