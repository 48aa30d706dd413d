-- Engram schema, version 26: the vector backend port made whole (issue 31, chalicelib/search/backends).
--
-- Backends are named by one table in Python (chalicelib.config.VECTOR_BACKENDS: name -> adapter). The schema no
-- longer lists them: a store's backend and a move's target are any backend name (the settings and the CLI refuse
-- names the table does not hold), and the triggers stop testing for one backend's name. They ask one question
-- instead — does the store's backend keep its candidates in Postgres (the default backend: HNSW and BM25 postings
-- maintained here, in the same transaction)? — and queue every other store's changed files in the outbox, for
-- whichever backend the store is on. An entry now records that backend, so a store's points are removed from the
-- backend that holds them even after the store was deleted or moved to another backend.

ALTER TABLE vector_stores DROP CONSTRAINT vector_stores_backend_check;
ALTER TABLE vector_stores ADD CONSTRAINT vector_stores_backend_check CHECK (backend ~ '^[a-z][a-z0-9_]{0,31}$');
ALTER TABLE vector_store_reindex DROP CONSTRAINT vector_store_reindex_target_check;
ALTER TABLE vector_store_reindex ADD CONSTRAINT vector_store_reindex_target_check
    CHECK (target ~ '^[a-z][a-z0-9_]{0,31}$');

-- The one place the schema names a backend: the default one, whose candidates are Postgres' own indexes.
CREATE FUNCTION engram_backend_in_postgres(backend text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT backend = 'pgvector'
$$;

-- Every entry queued so far was for the one other backend of versions 23-25.
ALTER TABLE vector_index_outbox ADD COLUMN backend text;
UPDATE vector_index_outbox SET backend = 'qdrant' WHERE backend IS NULL;  -- backfill of versions 23-25
ALTER TABLE vector_index_outbox ALTER COLUMN backend SET NOT NULL;

CREATE OR REPLACE FUNCTION engram_queue_index_sync(changed jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO vector_index_outbox (tenant_id, vector_store_id, file_id, backend)
    SELECT DISTINCT c.tenant_id, c.vector_store_id, c.file_id, s.backend
    FROM jsonb_to_recordset(changed) AS c(tenant_id text, vector_store_id text, file_id text)
    JOIN vector_stores s ON s.id = c.vector_store_id AND NOT engram_backend_in_postgres(s.backend)
    ON CONFLICT (vector_store_id, file_id) DO UPDATE
        SET seq = nextval('vector_index_outbox_seq'), queued_at = now(), attempts = 0, last_error = NULL,
            backend = EXCLUDED.backend
$$;

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
        IF NOT engram_backend_in_postgres(store.backend) THEN
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
           FROM old_chunks c JOIN vector_stores s ON s.id = c.vector_store_id
                                                   AND engram_backend_in_postgres(s.backend),
                unnest(c.keywords) AS t) AS o
    WHERE p.partition_key = o.partition_key AND p.lexeme = o.lexeme AND p.impact = o.impact
      AND p.chunk_id = o.id;
    IF EXISTS (SELECT 1 FROM vector_stores s
               WHERE NOT engram_backend_in_postgres(s.backend) AND s.id IN (SELECT vector_store_id FROM old_chunks))
    THEN
        PERFORM engram_queue_index_sync((SELECT jsonb_agg(DISTINCT jsonb_build_object(
            'tenant_id', c.tenant_id, 'vector_store_id', c.vector_store_id, 'file_id', c.file_id))
            FROM old_chunks c));
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION engram_chunks_attributes_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM vector_stores s
               WHERE NOT engram_backend_in_postgres(s.backend) AND s.id IN (SELECT vector_store_id FROM new_chunks))
    THEN
        PERFORM engram_queue_index_sync((SELECT jsonb_agg(DISTINCT jsonb_build_object(
            'tenant_id', n.tenant_id, 'vector_store_id', n.vector_store_id, 'file_id', n.file_id))
            FROM new_chunks n JOIN old_chunks o ON o.id = n.id WHERE o.attributes IS DISTINCT FROM n.attributes));
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION engram_vector_stores_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    DELETE FROM chunk_postings p USING old_stores o WHERE p.partition_key = o.partition_key;
    INSERT INTO vector_index_outbox (tenant_id, vector_store_id, file_id, embedding_dim, backend)
    SELECT o.tenant_id, o.id, '', o.embedding_dim, o.backend FROM old_stores o
    WHERE NOT engram_backend_in_postgres(o.backend)
    ON CONFLICT (vector_store_id, file_id) DO UPDATE SET seq = nextval('vector_index_outbox_seq'), queued_at = now(),
        backend = EXCLUDED.backend;
    DELETE FROM vector_index_outbox q USING old_stores o WHERE q.vector_store_id = o.id AND q.file_id <> '';
    RETURN NULL;
END $$;
