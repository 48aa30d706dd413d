-- Engram schema: shared read-only knowledge (vector stores an operator shares with every tenant).
--
-- An operator (the table owner: `engram stores share VS_ID`) marks a store shared. Every tenant can then read the
-- store row and what searching it needs — its chunks, BM25 statistics (keyword_stats) and postings — while only
-- its owner can change anything: writes stay under the owner-only `tenant_isolation` policies, and the new
-- `shared_read` policies are FOR SELECT. Files, attachments (vector_store_files), file batches and file bytes stay
-- owner-only; a search of a shared store shows each hit's filename through the view shared_store_files below.
--
-- Sharing extends visibility only to rows whose tenant_id is the store's owner's: a row another tenant manages to
-- write with a shared store's id (its own tenant_id) stays visible to that tenant alone. Writes naming a store the
-- writer does not own are refused outright (restrictive policies below) for the tables that reference stores.

ALTER TABLE vector_stores
    ADD COLUMN shared     boolean NOT NULL DEFAULT false,
    ADD COLUMN shared_at  timestamptz,                    -- when it was last shared (NULL while not shared)
    ADD COLUMN shared_by  text,                           -- who shared it: the operator's name, free text
    ADD CONSTRAINT vector_stores_shared_at CHECK (shared = (shared_at IS NOT NULL));
-- The policies below read the (few) shared stores once per statement through this index.
CREATE INDEX vector_stores_shared ON vector_stores (id, tenant_id, partition_key) WHERE shared;

-- Only an operator shares or unshares: the API's role may neither create a store shared nor change the flag.
CREATE FUNCTION engram_guard_sharing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_user = 'engram_app' AND (
           (TG_OP = 'INSERT' AND (NEW.shared OR NEW.shared_at IS NOT NULL OR NEW.shared_by IS NOT NULL))
        OR (TG_OP = 'UPDATE' AND (NEW.shared, NEW.shared_at, NEW.shared_by)
                                 IS DISTINCT FROM (OLD.shared, OLD.shared_at, OLD.shared_by))) THEN
        RAISE EXCEPTION 'only an operator can share or unshare a vector store (engram stores share)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER vector_stores_sharing BEFORE INSERT OR UPDATE OF shared, shared_at, shared_by ON vector_stores
    FOR EACH ROW EXECUTE FUNCTION engram_guard_sharing();

-- Reads. Permissive policies of one command are OR-ed: SELECT sees the caller's rows or shared ones; UPDATE,
-- INSERT and DELETE see only tenant_isolation (FOR ALL), i.e. the caller's rows. The subqueries are uncorrelated
-- (planned once per statement, probed per row) and themselves filtered by vector_stores' policies.
CREATE POLICY shared_read ON vector_stores FOR SELECT USING (shared);

CREATE POLICY shared_read ON chunks FOR SELECT
    USING ((vector_store_id, tenant_id) IN (SELECT s.id, s.tenant_id FROM vector_stores s WHERE s.shared));

CREATE POLICY shared_read ON chunk_postings FOR SELECT
    USING ((partition_key, tenant_id) IN (SELECT s.partition_key, s.tenant_id FROM vector_stores s WHERE s.shared));

-- keyword_stats has no tenant column. Until now any store the caller could see qualified, for writes too; now a
-- store is visible without being the caller's, so writes (and the FOR ALL policy) require the caller's own store.
ALTER POLICY tenant_isolation ON keyword_stats
    USING (EXISTS (SELECT 1 FROM vector_stores s
                   WHERE s.id = keyword_stats.vector_store_id AND s.tenant_id = engram_current_tenant()))
    WITH CHECK (EXISTS (SELECT 1 FROM vector_stores s
                        WHERE s.id = keyword_stats.vector_store_id AND s.tenant_id = engram_current_tenant()));
CREATE POLICY shared_read ON keyword_stats FOR SELECT
    USING (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.shared));

-- Writes that name a store must name one of the caller's (restrictive: AND-ed with tenant_isolation). The
-- foreign keys would accept another tenant's store (they are checked without row-level security).
CREATE POLICY own_store_insert ON vector_store_files AS RESTRICTIVE FOR INSERT
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_update ON vector_store_files AS RESTRICTIVE FOR UPDATE
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_insert ON chunks AS RESTRICTIVE FOR INSERT
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_update ON chunks AS RESTRICTIVE FOR UPDATE
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_insert ON chunk_postings AS RESTRICTIVE FOR INSERT
    WITH CHECK (partition_key IN (SELECT s.partition_key FROM vector_stores s
                                  WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_insert ON file_batches AS RESTRICTIVE FOR INSERT
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));
CREATE POLICY own_store_update ON file_batches AS RESTRICTIVE FOR UPDATE
    WITH CHECK (vector_store_id IN (SELECT s.id FROM vector_stores s WHERE s.tenant_id = engram_current_tenant()));

-- The files of shared stores as every tenant may see them: id, filename and processing status only (no bytes,
-- attributes or errors). A view runs with its owner's rights (the table owner, whom row-level security does not
-- limit), so this definition is the whole rule: only the owner's own attachments of the owner's own files.
CREATE VIEW shared_store_files WITH (security_barrier) AS
SELECT a.vector_store_id, a.file_id, f.filename, a.status
FROM vector_stores s
JOIN vector_store_files a ON a.vector_store_id = s.id AND a.tenant_id = s.tenant_id
JOIN files f ON f.id = a.file_id AND f.tenant_id = s.tenant_id
WHERE s.shared;
GRANT SELECT ON shared_store_files TO engram_app;
