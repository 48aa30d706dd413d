"""API keys: hash-only storage, lookup through ``engram_tenant_for_key``, revocation, tenant-name validation, and
the ``engram keys`` CLI (real Postgres, schema from the bundled migrations)."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from chalicelib import config
from chalicelib.errors import InvalidRequestError
from chalicelib.store import api_keys
from engram_cli.main import app


def _row_text(conn, key_id: str) -> str:
    """Every column of the key's row rendered as text (bytea as hex), concatenated."""
    row = conn.execute("SELECT * FROM api_keys WHERE id = %s", (key_id,)).fetchone()
    return " ".join(bytes(v).hex() if isinstance(v, (bytes, memoryview)) else str(v) for v in row)


def test_create_stores_only_the_hash_and_a_hint(conn):
    key, secret = api_keys.create_key(conn, "acme", "ci")
    assert secret.startswith(api_keys.KEY_PREFIX) and len(secret) == len(api_keys.KEY_PREFIX) + 43
    assert key.id.startswith("key_") and key.tenant_id == "acme" and key.name == "ci"
    assert key.key_hint == f"sk-engram-...{secret[-4:]}"
    assert key.last_used_at is None and key.revoked_at is None

    stored = conn.execute("SELECT key_hash FROM api_keys WHERE id = %s", (key.id,)).fetchone()[0]
    assert bytes(stored) == hashlib.sha256(secret.encode()).digest() == api_keys.hash_key(secret)
    text = _row_text(conn, key.id)
    body = secret.removeprefix(api_keys.KEY_PREFIX)
    assert secret not in text and body not in text and body.encode().hex() not in text
    assert conn.execute("SELECT 1 FROM tenants WHERE id = 'acme'").fetchone() is not None

    _, other = api_keys.create_key(conn, "acme")
    assert other != secret


def test_lookup_records_use_and_revoke_stops_it(conn):
    key, secret = api_keys.create_key(conn, "lookup-tenant")
    assert api_keys.tenant_for_key(conn, secret) == "lookup-tenant"
    [listed] = api_keys.list_keys(conn, "lookup-tenant")
    assert listed.id == key.id and listed.last_used_at is not None

    assert api_keys.tenant_for_key(conn, secret + "x") is None
    assert api_keys.tenant_for_key(conn, "not-a-key") is None
    assert api_keys.revoke_key(conn, key.id) is True
    assert api_keys.tenant_for_key(conn, secret) is None
    assert api_keys.revoke_key(conn, key.id) is False  # already revoked
    assert api_keys.revoke_key(conn, "key_doesnotexist") is False
    [listed] = api_keys.list_keys(conn, "lookup-tenant")
    assert listed.revoked_at is not None


def test_lookup_works_for_a_role_without_access_to_the_table(conn):
    _, secret = api_keys.create_key(conn, "rls-tenant")
    conn.execute("SET ROLE engram_app")
    try:
        with pytest.raises(Exception, match="permission denied"), conn.transaction():
            conn.execute("SELECT * FROM api_keys")
        assert api_keys.tenant_for_key(conn, secret) == "rls-tenant"
    finally:
        conn.execute("RESET ROLE")


def test_list_is_oldest_first_and_filters_by_tenant(conn):
    first, _ = api_keys.create_key(conn, "list-a", "one")
    second, _ = api_keys.create_key(conn, "list-b", "two")
    third, _ = api_keys.create_key(conn, "list-a", "three")
    assert [k.id for k in api_keys.list_keys(conn, "list-a")] == [first.id, third.id]
    everything = [k.id for k in api_keys.list_keys(conn)]
    assert everything.index(first.id) < everything.index(second.id) < everything.index(third.id)
    assert api_keys.list_keys(conn, "no-such-tenant") == []


@pytest.mark.parametrize("tenant", ["", "a" * 65, "has space", "semi;colon", "ünicode", "a/b"])
def test_invalid_tenant_names_are_rejected(conn, tenant):
    with pytest.raises(InvalidRequestError) as info:
        api_keys.create_key(conn, tenant)
    assert info.value.param == "tenant"


@pytest.mark.parametrize("tenant", ["a", "A-b_c.9", "x" * 64])
def test_valid_tenant_names_are_accepted(conn, tenant):
    key, _ = api_keys.create_key(conn, tenant)
    assert key.tenant_id == tenant


@pytest.fixture()
def cli(settings, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", settings.database_url)
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("ENGRAM_TENANT", "cli-tests")
    config.settings.cache_clear()
    runner = CliRunner()

    def run(*args: str, expect: int = 0):
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == expect, result.output
        return result

    yield run
    config.settings.cache_clear()


def test_cli_create_prints_the_key_last_and_it_resolves(cli, conn):
    result = cli("keys", "create", "--tenant", "cli-keys", "--name", "deploy")
    secret = result.stdout.rstrip("\n").splitlines()[-1]
    assert secret.startswith(api_keys.KEY_PREFIX) and secret.strip() == secret and " " not in secret
    assert "cli-keys" in result.output
    assert api_keys.tenant_for_key(conn, secret) == "cli-keys"

    listed = json.loads(cli("keys", "list", "--tenant", "cli-keys", "--json").stdout)
    [entry] = listed
    assert entry["tenant_id"] == "cli-keys" and entry["name"] == "deploy" and entry["revoked_at"] is None
    assert entry["key_hint"].endswith(secret[-4:]) and isinstance(entry["last_used_at"], int)
    assert secret not in json.dumps(listed)

    table = cli("keys", "list").stdout
    assert entry["id"] in table and secret not in table

    cli("keys", "revoke", entry["id"])
    assert api_keys.tenant_for_key(conn, secret) is None
    [entry] = json.loads(cli("keys", "list", "--tenant", "cli-keys", "--json").stdout)
    assert isinstance(entry["revoked_at"], int)

    again = cli("keys", "revoke", entry["id"], expect=1)
    assert "already revoked" in again.output
    unknown = cli("keys", "revoke", "key_nope", expect=1)
    assert "does not exist" in unknown.output


def test_cli_create_rejects_a_bad_tenant_name(cli):
    result = cli("keys", "create", "--tenant", "bad name", expect=2)
    assert "Invalid tenant name" in result.output and result.stdout.strip() == ""


def test_grants_are_stored_and_resolved_for_a_role_without_access_to_the_table(conn):
    from chalicelib.access import FULL, Access

    full, full_secret = api_keys.create_key(conn, "grants")
    limited, secret = api_keys.create_key(conn, "grants", "desktop", grants=Access(
        {"files": "none", "vector_stores": "read", "memories": "write"}, {"user_id": "alice"}))
    assert full.permissions is None and full.memory_scope is None  # full access is stored as NULLs
    assert limited.permissions == {"files": "none", "vector_stores": "read", "responses": "none",
                                   "memories": "write", "operations": "none"}
    assert limited.memory_scope == {"user_id": "alice"}
    conn.execute("SET ROLE engram_app")
    try:
        tenant, grants = api_keys.grants_for_key(conn, secret)
        assert api_keys.grants_for_key(conn, full_secret) == ("grants", FULL)
        assert api_keys.grants_for_key(conn, secret + "x") is None
    finally:
        conn.execute("RESET ROLE")
    assert tenant == "grants" and not grants.full and grants.memory_scope == {"user_id": "alice"}
    assert grants.allows("vector_stores", "read") and not grants.allows("vector_stores", "write")
    assert grants.allows("memories", "read") and not grants.allows("files", "read")


@pytest.mark.parametrize("permissions, scope, param", [
    ({"files": "admin"}, None, "permissions.files"), ({"models": "read"}, None, "permissions"),
    (None, {"user_id": ""}, "memory_scope.user_id"), (None, {"team_id": "x"}, "memory_scope"),
    (None, {"user_id": "x" * 129}, "memory_scope.user_id")])
def test_malformed_grants_are_refused(conn, permissions, scope, param):
    from chalicelib.access import Access

    with pytest.raises(InvalidRequestError) as info:
        api_keys.create_key(conn, "grants-bad", grants=Access(permissions or {"files": "write"}, scope or {}))
    assert info.value.param == param


def test_cli_creates_restricted_and_bound_keys(cli, conn):
    secret = cli("keys", "create", "--tenant", "cli-grants", "--name", "claude", "--memories", "write",
                 "--vector-stores", "read", "--user-id", "alice").stdout.splitlines()[-1]
    tenant, grants = api_keys.grants_for_key(conn, secret)
    assert tenant == "cli-grants" and dict(grants.memory_scope) == {"user_id": "alice"}
    assert grants.as_dict()["permissions"] == {"files": "none", "vector_stores": "read", "responses": "none",
                                               "memories": "write", "operations": "none"}
    reader = cli("keys", "create", "--tenant", "cli-grants", "--read-only", "--memories", "none")
    assert "files read" in " ".join(reader.output.split())
    _, read_only = api_keys.grants_for_key(conn, reader.stdout.splitlines()[-1])
    assert read_only.as_dict()["permissions"] == {"files": "read", "vector_stores": "read", "responses": "read",
                                                  "memories": "none", "operations": "none"}  # never implied
    listed = json.loads(cli("keys", "list", "--tenant", "cli-grants", "--json").stdout)
    assert listed[0]["memory_scope"] == {"user_id": "alice"} and listed[0]["permissions"]["memories"] == "write"
    assert listed[1]["memory_scope"] is None
    bad = cli("keys", "create", "--tenant", "cli-grants", "--files", "admin", expect=2)
    assert "Invalid level" in bad.output and bad.stdout.strip() == ""


def test_operator_keys_are_asked_for_by_name(cli, conn):
    from chalicelib.access import FULL

    plain = cli("keys", "create", "--tenant", "cli-ops").stdout.splitlines()[-1]
    _, grants = api_keys.grants_for_key(conn, plain)
    assert grants == FULL and grants.level("operations") == "none" and not grants.operator  # full is no operator
    made = cli("keys", "create", "--tenant", "cli-ops", "--operator")
    assert "full access and operator" in " ".join(made.output.split())
    _, operator = api_keys.grants_for_key(conn, made.stdout.splitlines()[-1])
    assert operator.full and operator.operator and operator.as_dict()["permissions"]["operations"] == "write"
    watcher = cli("keys", "create", "--tenant", "cli-ops", "--read-only", "--operations", "read")
    _, reads = api_keys.grants_for_key(conn, watcher.stdout.splitlines()[-1])
    assert reads.as_dict()["permissions"] == {"files": "read", "vector_stores": "read", "responses": "read",
                                              "memories": "read", "operations": "read"} and not reads.operator
    both = cli("keys", "create", "--tenant", "cli-ops", "--operator", "--operations", "read", expect=2)
    assert "--operator" in both.output and both.stdout.strip() == ""
    listed = json.loads(cli("keys", "list", "--tenant", "cli-ops", "--json").stdout)
    assert [k["permissions"]["operations"] for k in listed] == ["none", "write", "read"]
