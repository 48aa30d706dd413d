-- Engram schema, version 9: BM25 top-k without scoring every match (chalicelib/search/keyword.py).
--
-- Until now the keyword leg found every chunk matching any query lexeme through the GIN index and unnested each
-- one's whole tsvector to score it: for common words that is a third to two thirds of the corpus per query. Now
-- each vector store keeps impact-ordered postings, one row per (lexeme, chunk): the chunk's BM25 term-frequency
-- component for that lexeme,
--
--     impact = tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl_ref))          k1 = 0.9, b = 0.4 (Anserini)
--
-- computed against the store's reference average length avgdl_ref (its average when its postings were last built,
-- so an impact can be recomputed exactly to delete its posting). A query walks each term's postings from the
-- highest impact down and stops as soon as no unseen chunk can beat the k-th best score (Fagin's threshold
-- algorithm; the bound scales impacts by max(1, avgdl / avgdl_ref), since a posting's BM25 component at the
-- current avgdl is at most that factor times its stored impact). Seen chunks are scored exactly from their own
-- tsvector, so results equal the exhaustive scorer's.
--
-- Statistics (per store: chunk count, total length, document frequency per lexeme) and postings are maintained by
-- statement-level triggers on chunks, in the same transaction as the chunk rows. The tsvector is computed once, by
-- the writer (it was a generated column computed twice per row), and the GIN index goes: nothing reads it now.

ALTER TABLE vector_stores ADD COLUMN partition_key integer GENERATED ALWAYS AS IDENTITY UNIQUE;
ALTER TABLE vector_stores ADD COLUMN avgdl_ref real CHECK (avgdl_ref > 0);

ALTER TABLE chunks ALTER COLUMN keywords DROP EXPRESSION;
ALTER TABLE chunks ALTER COLUMN keyword_length DROP EXPRESSION;
DROP INDEX IF EXISTS chunks_keywords;

-- A posting's BM25 term component against a reference average length (the formula above).
CREATE FUNCTION engram_bm25_impact(tf integer, len integer, avgdl real) RETURNS real
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT (tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * len / avgdl)))::real $$;

-- The exact BM25 score of one document for the query lexemes `terms` with inverse document frequencies `idfs`:
-- Σ idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl)). Only the query lexemes of the tsvector are
-- looked at (setweight marks them, ts_filter keeps them: both in C), so a long document costs little.
CREATE FUNCTION engram_bm25_score(doc tsvector, len integer, terms text[], idfs float8[], avgdl float8)
    RETURNS float8
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT coalesce(sum(idfs[array_position(terms, t.lexeme)] * t.tf * 1.9
                        / (t.tf + 0.9 * (0.6 + 0.4 * len / avgdl))), 0)
    FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
          FROM unnest(ts_filter(setweight(doc, 'A', terms), '{a}')) AS u) AS t
    $$;

CREATE TABLE chunk_postings (
    tenant_id      text NOT NULL,
    partition_key  integer NOT NULL REFERENCES vector_stores(partition_key) ON DELETE CASCADE,
    lexeme         text NOT NULL,
    impact         real NOT NULL,
    chunk_id       bigint NOT NULL,
    -- Sorted access, highest impact first: an index scan backward over (partition, lexeme).
    PRIMARY KEY (partition_key, lexeme, impact, chunk_id)
);
GRANT SELECT, INSERT, DELETE ON chunk_postings TO engram_app;
ALTER TABLE chunk_postings ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON chunk_postings
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

-- A store's postings rebuilt against its current average length (a store whose length profile drifted).
CREATE FUNCTION engram_rebuild_postings(store text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ref real;
BEGIN
    UPDATE vector_stores SET avgdl_ref = greatest(keyword_length::real / greatest(chunk_count, 1), 1)
    WHERE id = store RETURNING avgdl_ref INTO ref;
    DELETE FROM chunk_postings WHERE partition_key = (SELECT partition_key FROM vector_stores WHERE id = store);
    INSERT INTO chunk_postings (tenant_id, partition_key, lexeme, impact, chunk_id)
    SELECT c.tenant_id, s.partition_key, t.lexeme,
           engram_bm25_impact(coalesce(array_length(t.positions, 1), 1), c.keyword_length, ref), c.id
    FROM chunks c JOIN vector_stores s ON s.id = c.vector_store_id, unnest(c.keywords) AS t
    WHERE c.vector_store_id = store;
END $$;

-- After chunks are inserted (one statement per file swap): store totals, df, postings. A store's reference length
-- follows its average while they differ by more than 25 % (small stores, early on): its postings are rebuilt, so
-- the bound factor max(1, avgdl / avgdl_ref) stays ≤ 1.25 and the impact order stays close to the true one.
CREATE FUNCTION engram_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    store record;
BEGIN
    UPDATE vector_stores s SET chunk_count = s.chunk_count + n.docs, keyword_length = s.keyword_length + n.len
    FROM (SELECT vector_store_id, count(*) AS docs, sum(keyword_length) AS len FROM new_chunks GROUP BY 1) AS n
    WHERE s.id = n.vector_store_id;
    INSERT INTO keyword_stats (vector_store_id, lexeme, df)
    SELECT c.vector_store_id, t.lexeme, count(*) FROM new_chunks c, unnest(c.keywords) AS t GROUP BY 1, 2
    ORDER BY 1, 2
    ON CONFLICT (vector_store_id, lexeme) DO UPDATE SET df = keyword_stats.df + EXCLUDED.df;
    FOR store IN
        SELECT s.id, s.avgdl_ref, s.keyword_length::real / greatest(s.chunk_count, 1) AS avgdl FROM vector_stores s
        WHERE s.id IN (SELECT DISTINCT vector_store_id FROM new_chunks)
    LOOP
        IF store.avgdl_ref IS NULL OR store.avgdl > 1.25 * store.avgdl_ref OR store.avgdl < 0.8 * store.avgdl_ref THEN
            PERFORM engram_rebuild_postings(store.id);
        ELSE
            INSERT INTO chunk_postings (tenant_id, partition_key, lexeme, impact, chunk_id)
            SELECT c.tenant_id, s.partition_key, t.lexeme,
                   engram_bm25_impact(coalesce(array_length(t.positions, 1), 1), c.keyword_length, s.avgdl_ref),
                   c.id
            FROM new_chunks c JOIN vector_stores s ON s.id = c.vector_store_id, unnest(c.keywords) AS t
            WHERE c.vector_store_id = store.id;
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- After chunks are deleted: the same, subtracted; each posting recomputed exactly from the deleted row. A store
-- deleted with its chunks is already gone here (its statistics and postings went with it by cascade).
CREATE FUNCTION engram_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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

CREATE TRIGGER chunks_inserted AFTER INSERT ON chunks REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION engram_chunks_inserted();
CREATE TRIGGER chunks_deleted AFTER DELETE ON chunks REFERENCING OLD TABLE AS old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION engram_chunks_deleted();

-- Existing stores: their postings are built from their chunks.
SELECT engram_rebuild_postings(id) FROM vector_stores WHERE chunk_count > 0;

-- The exact BM25 top-k of a query over the chunks of `stores` (Fagin's threshold algorithm over the stores'
-- impact-ordered postings). `terms` are the query's lexemes with their inverse document frequencies `idfs` and
-- `avgdl` the stores' average length (computed by the caller from keyword_stats and vector_stores);
-- `filter_sql` is an optional extra predicate over chunks (literals inlined by the caller). Each round reads the
-- next `batch` postings (doubling each round) of every (store, lexeme) list, highest impact first, and scores
-- the chunks it meets exactly; it stops when the k-th best score reaches the threshold τ = Σ over lexemes of
-- idf · max(1, avgdl / avgdl_ref) · (the impact last read from its lists; 0 once exhausted): no chunk left unread
-- can score more than τ. Runs as its caller: row-level security confines it to the caller's tenant.
CREATE FUNCTION engram_chunks_bm25_topk(stores text[], terms text[], idfs float8[], avgdl float8, k integer,
                                        filter_sql text DEFAULT NULL, batch integer DEFAULT 64)
    RETURNS TABLE (chunk_id bigint, score float8)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    l_part integer[];  l_term integer[];  l_imp real[];  l_doc bigint[];  l_done boolean[];
    factor float8;
    top_ids bigint[] := '{}';  top_scores float8[] := '{}';
    fetched record;
    new_ids bigint[];
    size integer := greatest(batch, 1);
    theta float8;  tau float8;
    scoring text;
BEGIN
    IF k < 1 OR coalesce(array_length(terms, 1), 0) = 0 THEN
        RETURN;
    END IF;
    -- The lists: every (store, lexeme) pair, each with a keyset cursor (last impact, last chunk) at +infinity.
    SELECT array_agg(s.partition_key ORDER BY s.partition_key, t.i), array_agg(t.i ORDER BY s.partition_key, t.i),
           max(greatest(1.0, avgdl / s.avgdl_ref))
    INTO l_part, l_term, factor
    FROM vector_stores s, generate_subscripts(terms, 1) AS t(i)
    WHERE s.id = ANY(stores) AND s.avgdl_ref IS NOT NULL;
    IF l_part IS NULL THEN
        RETURN;
    END IF;
    l_imp := array_fill('Infinity'::real, ARRAY[array_length(l_part, 1)]);
    l_doc := array_fill(9223372036854775807::bigint, ARRAY[array_length(l_part, 1)]);
    l_done := array_fill(false, ARRAY[array_length(l_part, 1)]);
    scoring := 'SELECT c.id, engram_bm25_score(c.keywords, c.keyword_length, $1, $2, $3) AS s FROM chunks c '
               || 'WHERE c.id = ANY($4) AND c.vector_store_id = ANY($5)'
               || coalesce(' AND (' || filter_sql || ')', '');
    LOOP
        new_ids := '{}';
        FOR fetched IN
            SELECT l.i, count(p.chunk_id) AS n,
                   (array_agg(p.impact ORDER BY p.impact, p.chunk_id))[1] AS last_impact,
                   (array_agg(p.chunk_id ORDER BY p.impact, p.chunk_id))[1] AS last_chunk,
                   array_agg(p.chunk_id) FILTER (WHERE p.chunk_id IS NOT NULL) AS ids
            FROM generate_subscripts(l_part, 1) AS l(i)
            LEFT JOIN LATERAL (
                SELECT cp.impact, cp.chunk_id FROM chunk_postings cp
                WHERE cp.partition_key = l_part[l.i] AND cp.lexeme = terms[l_term[l.i]]
                  AND (cp.impact, cp.chunk_id) < (l_imp[l.i], l_doc[l.i])
                ORDER BY cp.impact DESC, cp.chunk_id DESC LIMIT size) AS p ON true
            WHERE NOT l_done[l.i]
            GROUP BY l.i
        LOOP
            IF fetched.n < size THEN
                l_done[fetched.i] := true;
            END IF;
            IF fetched.n > 0 THEN
                l_imp[fetched.i] := fetched.last_impact;
                l_doc[fetched.i] := fetched.last_chunk;
                new_ids := new_ids || fetched.ids;
            END IF;
        END LOOP;
        IF array_length(new_ids, 1) > 0 THEN
            EXECUTE 'SELECT array_agg(id ORDER BY s DESC, id), array_agg(s ORDER BY s DESC, id) FROM ('
                    || 'SELECT id, s FROM (SELECT DISTINCT ON (id) id, s FROM ('
                    || 'SELECT unnest($6::bigint[]) AS id, unnest($7::float8[]) AS s UNION ALL ' || scoring
                    || ') AS a ORDER BY id) AS b WHERE s > 0 ORDER BY s DESC, id LIMIT $8) AS top'
                INTO top_ids, top_scores
                USING terms, idfs, avgdl, new_ids, stores, top_ids, top_scores, k;
            top_ids := coalesce(top_ids, '{}');
            top_scores := coalesce(top_scores, '{}');
        END IF;
        -- The threshold: the best any unread chunk could still score.
        SELECT coalesce(sum(idfs[u.term] * factor * u.imp), 0) INTO tau
        FROM (SELECT l_term[l.i] AS term, max(CASE WHEN l_done[l.i] THEN 0 ELSE l_imp[l.i] END) AS imp
              FROM generate_subscripts(l_part, 1) AS l(i) GROUP BY 1) AS u;
        theta := CASE WHEN coalesce(array_length(top_ids, 1), 0) >= k THEN top_scores[k] ELSE 0 END;
        EXIT WHEN tau <= 0 OR (coalesce(array_length(top_ids, 1), 0) >= k AND theta >= tau);
        size := size * 2;
    END LOOP;
    RETURN QUERY SELECT unnest(top_ids), unnest(top_scores);
END $$;
