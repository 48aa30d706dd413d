-- Engram schema, version 12: the chunk triggers of version 9 (0009_keyword_postings.sql) with fewer statements per
-- firing; what they maintain (store totals, document frequencies, impact-ordered postings) is unchanged.
--
-- Every file swap deletes the file's previous chunks first, and a file's first version has none: the delete
-- trigger then returns at once instead of running its three statements over an empty transition table. The insert
-- trigger updates the store totals and reads the store's partition and reference length back in one statement
-- (one store per swap), instead of an update, a query for the loop and a join in the postings insert.

CREATE OR REPLACE FUNCTION engram_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    store record;
BEGIN
    FOR store IN
        UPDATE vector_stores s SET chunk_count = s.chunk_count + n.docs, keyword_length = s.keyword_length + n.len
        FROM (SELECT vector_store_id, count(*) AS docs, sum(keyword_length) AS len FROM new_chunks GROUP BY 1) AS n
        WHERE s.id = n.vector_store_id
        RETURNING s.id, s.partition_key, s.avgdl_ref, s.keyword_length::real / greatest(s.chunk_count, 1) AS avgdl
    LOOP
        INSERT INTO keyword_stats (vector_store_id, lexeme, df)
        SELECT store.id, t.lexeme, count(*) FROM new_chunks c, unnest(c.keywords) AS t
        WHERE c.vector_store_id = store.id GROUP BY 2 ORDER BY 2
        ON CONFLICT (vector_store_id, lexeme) DO UPDATE SET df = keyword_stats.df + EXCLUDED.df;
        IF store.avgdl_ref IS NULL OR store.avgdl > 1.25 * store.avgdl_ref OR store.avgdl < 0.8 * store.avgdl_ref THEN
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
           FROM old_chunks c JOIN vector_stores s ON s.id = c.vector_store_id, unnest(c.keywords) AS t) AS o
    WHERE p.partition_key = o.partition_key AND p.lexeme = o.lexeme AND p.impact = o.impact
      AND p.chunk_id = o.id;
    RETURN NULL;
END $$;
