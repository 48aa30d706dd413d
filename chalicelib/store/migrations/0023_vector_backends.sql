-- Engram schema, version 23: a vector store's vectors and keyword index may live in Qdrant (issue 23,
-- chalicelib/search/backends). Postgres stays the system of record: tenants, stores, files, attachments, statuses,
-- every chunk's text, its tsvector and BM25 statistics, the embedding cache.
--
-- A store whose backend is 'qdrant' keeps its chunks' rows without an embedding (the vector is in Qdrant and in the
-- embedding cache: `engram stores reindex` moves a store back from there) and without postings (Qdrant's sparse
-- index replaces them); its document frequencies and totals are still maintained, because the query's idf and the
-- exact BM25 of the candidates come from Postgres on both backends, so scores mean the same.
--
-- Every change to a Qdrant store's chunks (a file's chunks swapped in or deleted, attributes updated, the store
-- deleted) queues the file in vector_index_outbox in the same transaction, by trigger, whichever code path made the
-- change; the sync (chalicelib/search/backends/qdrant_sync.py) makes Qdrant's points of each queued file equal
-- to its rows here, then removes the entry if no newer change arrived meanwhile (seq).

ALTER TABLE vector_stores ADD COLUMN backend text NOT NULL DEFAULT 'pgvector'
    CHECK (backend IN ('pgvector', 'qdrant'));
ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL;

CREATE SEQUENCE vector_index_outbox_seq;
CREATE TABLE vector_index_outbox (
    tenant_id        text NOT NULL,
    vector_store_id  text NOT NULL,
    file_id          text NOT NULL,        -- '' : the whole store (deleted)
    embedding_dim    integer,              -- a deleted store's (its row is gone); NULL for a file
    seq              bigint NOT NULL DEFAULT nextval('vector_index_outbox_seq'),
    queued_at        timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    PRIMARY KEY (vector_store_id, file_id)
);
CREATE INDEX vector_index_outbox_order ON vector_index_outbox (seq);
GRANT SELECT, INSERT, UPDATE, DELETE ON vector_index_outbox TO engram_app;
GRANT USAGE, SELECT, UPDATE ON SEQUENCE vector_index_outbox_seq TO engram_app;
ALTER TABLE vector_index_outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON vector_index_outbox
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

-- Queue the files of `changed` (a transition table's rows: tenant_id, vector_store_id, file_id) that belong to
-- Qdrant stores; a file already queued moves to the back with a new seq.
CREATE FUNCTION engram_queue_index_sync(changed jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO vector_index_outbox (tenant_id, vector_store_id, file_id)
    SELECT DISTINCT c.tenant_id, c.vector_store_id, c.file_id
    FROM jsonb_to_recordset(changed) AS c(tenant_id text, vector_store_id text, file_id text)
    JOIN vector_stores s ON s.id = c.vector_store_id AND s.backend = 'qdrant'
    ON CONFLICT (vector_store_id, file_id) DO UPDATE
        SET seq = nextval('vector_index_outbox_seq'), queued_at = now(), attempts = 0, last_error = NULL
$$;

-- The insert trigger of version 12, writing postings only for pgvector stores and queueing Qdrant stores' files.
CREATE OR REPLACE FUNCTION engram_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    store record;
BEGIN
    FOR store IN
        UPDATE vector_stores s SET chunk_count = s.chunk_count + n.docs, keyword_length = s.keyword_length + n.len
        FROM (SELECT vector_store_id, count(*) AS docs, sum(keyword_length) AS len FROM new_chunks GROUP BY 1) AS n
        WHERE s.id = n.vector_store_id
        RETURNING s.id, s.backend, s.partition_key, s.avgdl_ref,
                  s.keyword_length::real / greatest(s.chunk_count, 1) AS avgdl
    LOOP
        INSERT INTO keyword_stats (vector_store_id, lexeme, df)
        SELECT store.id, t.lexeme, count(*) FROM new_chunks c, unnest(c.keywords) AS t
        WHERE c.vector_store_id = store.id GROUP BY 2 ORDER BY 2
        ON CONFLICT (vector_store_id, lexeme) DO UPDATE SET df = keyword_stats.df + EXCLUDED.df;
        IF store.backend = 'qdrant' THEN
            PERFORM engram_queue_index_sync((SELECT jsonb_agg(DISTINCT jsonb_build_object(
                'tenant_id', c.tenant_id, 'vector_store_id', c.vector_store_id, 'file_id', c.file_id))
                FROM new_chunks c WHERE c.vector_store_id = store.id));
        ELSIF store.avgdl_ref IS NULL OR store.avgdl > 1.25 * store.avgdl_ref
              OR store.avgdl < 0.8 * store.avgdl_ref THEN
            PERFORM engram_rebuild_postings(store.id);
        ELSE
            INSERT INTO chunk_postings (tenant_id, partition_key, lexeme, impact, chunk_id)
            SELECT c.tenant_id, store.partition_key, t.lexeme,
                   engram_bm25_impact(coalesce(array_length(t.positions, 1), 1), c.keyword_length, store.avgdl_ref),
                   c.id
            FROM new_chunks c, unnest(c.keywords) AS t
            WHERE c.vector_store_id = store.id;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- The delete trigger of version 12: postings only for pgvector stores; Qdrant stores' files are queued.
CREATE OR REPLACE FUNCTION engram_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_chunks) THEN
        RETURN NULL;
    END IF;
    UPDATE vector_stores s SET chunk_count = s.chunk_count - o.docs, keyword_length = s.keyword_length - o.len
    FROM (SELECT vector_store_id, count(*) AS docs, sum(keyword_length) AS len FROM old_chunks GROUP BY 1) AS o
    WHERE s.id = o.vector_store_id;
    UPDATE keyword_stats k SET df = k.df - o.n
    FROM (SELECT c.vector_store_id, t.lexeme, count(*) AS n FROM old_chunks c, unnest(c.keywords) AS t
          GROUP BY 1, 2) AS o
    WHERE k.vector_store_id = o.vector_store_id AND k.lexeme = o.lexeme;
    DELETE FROM chunk_postings p
    USING (SELECT s.partition_key, t.lexeme,
                  engram_bm25_impact(coalesce(array_length(t.positions, 1), 1), c.keyword_length, s.avgdl_ref)
                      AS impact,
                  c.id
           FROM old_chunks c JOIN vector_stores s ON s.id = c.vector_store_id AND s.backend = 'pgvector',
                unnest(c.keywords) AS t) AS o
    WHERE p.partition_key = o.partition_key AND p.lexeme = o.lexeme AND p.impact = o.impact
      AND p.chunk_id = o.id;
    IF EXISTS (SELECT 1 FROM vector_stores s
               WHERE s.backend = 'qdrant' AND s.id IN (SELECT vector_store_id FROM old_chunks)) THEN
        PERFORM engram_queue_index_sync((SELECT jsonb_agg(DISTINCT jsonb_build_object(
            'tenant_id', c.tenant_id, 'vector_store_id', c.vector_store_id, 'file_id', c.file_id))
            FROM old_chunks c));
    END IF;
    RETURN NULL;
END $$;

-- A file's new attributes reach its chunks' rows (store.chunks.set_attributes), and so its points' payload. Only a
-- changed attributes value queues the file: `engram stores reindex` rewrites the embedding column of every row.
CREATE FUNCTION engram_chunks_attributes_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM vector_stores s
               WHERE s.backend = 'qdrant' AND s.id IN (SELECT vector_store_id FROM new_chunks)) THEN
        PERFORM engram_queue_index_sync((SELECT jsonb_agg(DISTINCT jsonb_build_object(
            'tenant_id', n.tenant_id, 'vector_store_id', n.vector_store_id, 'file_id', n.file_id))
            FROM new_chunks n JOIN old_chunks o ON o.id = n.id WHERE o.attributes IS DISTINCT FROM n.attributes));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_attributes_updated AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION engram_chunks_attributes_updated();

-- A deleted Qdrant store (or a tenant's stores, by cascade) queues the removal of all its points (file_id '').
-- The chunks' own delete trigger cannot: by the time it runs, the store's row is gone.
CREATE OR REPLACE FUNCTION engram_vector_stores_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    DELETE FROM chunk_postings p USING old_stores o WHERE p.partition_key = o.partition_key;
    INSERT INTO vector_index_outbox (tenant_id, vector_store_id, file_id, embedding_dim)
    SELECT o.tenant_id, o.id, '', o.embedding_dim FROM old_stores o WHERE o.backend = 'qdrant'
    ON CONFLICT (vector_store_id, file_id) DO UPDATE SET seq = nextval('vector_index_outbox_seq'), queued_at = now();
    DELETE FROM vector_index_outbox q USING old_stores o WHERE q.vector_store_id = o.id AND q.file_id <> '';
    RETURN NULL;
END $$;

-- `engram stores reindex`: a store moving between backends, resumable. started_max_chunk_id is the highest chunk id
-- when the move began (chunks written later are caught up when it ends); cursor_file_id the last file moved.
CREATE TABLE vector_store_reindex (
    vector_store_id       text PRIMARY KEY REFERENCES vector_stores(id) ON DELETE CASCADE,
    tenant_id             text NOT NULL,
    target                text NOT NULL CHECK (target IN ('pgvector', 'qdrant')),
    started_max_chunk_id  bigint NOT NULL,
    cursor_file_id        text,
    files_done            integer NOT NULL DEFAULT 0,
    started_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
