-- Engram schema, version 28: keys an agent can be trusted with (issue 32) — a permission per resource and an
-- optional memory scope the key is bound to (chalicelib/access.py says what they mean).
--
-- permissions: NULL for every key made before this migration (and every key made without options): full access,
-- as before. Otherwise a JSON object resource → level ({"files": "read", "memories": "write"}); a resource it does
-- not name is 'none'. memory_scope: NULL (unbound) or {"user_id": "alice"} (any of user_id, agent_id, run_id).
ALTER TABLE api_keys
    ADD COLUMN permissions  jsonb CHECK (permissions IS NULL OR jsonb_typeof(permissions) = 'object'),
    ADD COLUMN memory_scope jsonb CHECK (memory_scope IS NULL OR jsonb_typeof(memory_scope) = 'object');

-- The API resolves a key to its tenant and grants through this function (its role has no access to api_keys),
-- recording the use as engram_tenant_for_key does.
CREATE FUNCTION engram_key_grants(p_hash bytea)
    RETURNS TABLE (tenant_id text, permissions jsonb, memory_scope jsonb)
    LANGUAGE sql SECURITY DEFINER SET search_path = public
    AS $$ UPDATE api_keys SET last_used_at = now() WHERE key_hash = p_hash AND revoked_at IS NULL
          RETURNING tenant_id, permissions, memory_scope $$;
REVOKE ALL ON FUNCTION engram_key_grants(bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_key_grants(bytea) TO engram_app;
