-- Engram schema, version 20: a chunk posting no longer checks its store's row when it is written.
--
-- chunk_postings.partition_key referenced vector_stores(partition_key) ON DELETE CASCADE, so every posting the
-- chunks_inserted trigger writes (~65 per chunk) ran the foreign key's check: a query that finds the store's row
-- and locks it FOR KEY SHARE. In benchmarks/ingest.py's per-file store run (1,000 files of 2.3 chunks, HNSW
-- present) that check took 7.6 % of the backend's CPU (a sampling profile of the server). It proved nothing: the
-- trigger writes postings only for chunks whose own foreign key has just checked the same store, in the same
-- transaction, which holds that store's row locked (store.chunks.lock_store, and the trigger's own UPDATE of the
-- store's totals) until it commits; the API role's inserts must also name one of its own stores (the
-- own_store_insert policy, migration 0014).
--
-- The cascade is kept, as a statement trigger: deleting stores (one, or a tenant's through tenants' cascade)
-- deletes their postings in the same statement. It runs as the owner, as the foreign key's cascade did, so
-- row-level security hides none of the postings.

ALTER TABLE chunk_postings DROP CONSTRAINT chunk_postings_partition_key_fkey;

CREATE FUNCTION engram_vector_stores_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    DELETE FROM chunk_postings p USING old_stores o WHERE p.partition_key = o.partition_key;
    RETURN NULL;
END $$;

CREATE TRIGGER vector_stores_deleted AFTER DELETE ON vector_stores
    REFERENCING OLD TABLE AS old_stores FOR EACH STATEMENT EXECUTE FUNCTION engram_vector_stores_deleted();
