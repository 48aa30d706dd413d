-- Engram schema, version 3: row-level security, the second wall between tenants.
--
-- The application's queries already filter on tenant_id. In addition, the HTTP API runs every request as the role
-- engram_app (SET ROLE on a pooled connection, or a login role of that name when deployed) with the setting
-- engram.tenant naming the caller's tenant. engram_app neither owns these tables nor has BYPASSRLS, so the policies
-- below apply to it: a query that forgot its tenant filter still sees only the caller's rows. The table owner
-- (migrations, the CLI, scheduled housekeeping across tenants) is not subject to them.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'engram_app') THEN
        CREATE ROLE engram_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
END $$;
GRANT engram_app TO CURRENT_USER;  -- lets the connecting owner SET ROLE engram_app

GRANT USAGE ON SCHEMA public TO engram_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON
    tenants, files, vector_stores, vector_store_files, chunks, keyword_stats, embedding_cache,
    file_batches, file_batch_files
    TO engram_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO engram_app;
REVOKE ALL ON api_keys FROM engram_app;
GRANT EXECUTE ON FUNCTION engram_tenant_for_key(bytea) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_ensure_hnsw_index(integer, text, integer, integer) TO engram_app;

-- The caller's tenant; '' (no rows) when unset. missing_ok = true so an unset setting is not an error.
CREATE FUNCTION engram_current_tenant() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce(current_setting('engram.tenant', true), '') $$;

ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenants
    USING (id = engram_current_tenant()) WITH CHECK (id = engram_current_tenant());

ALTER TABLE files ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON files
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE vector_stores ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON vector_stores
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE vector_store_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON vector_store_files
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON chunks
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE embedding_cache ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON embedding_cache
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE file_batches ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON file_batches
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE file_batch_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON file_batch_files
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

-- keyword_stats has no tenant column: a row is visible when its store is (the subquery is itself filtered by
-- the vector_stores policy).
ALTER TABLE keyword_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON keyword_stats
    USING (EXISTS (SELECT 1 FROM vector_stores s WHERE s.id = keyword_stats.vector_store_id))
    WITH CHECK (EXISTS (SELECT 1 FROM vector_stores s WHERE s.id = keyword_stats.vector_store_id));
