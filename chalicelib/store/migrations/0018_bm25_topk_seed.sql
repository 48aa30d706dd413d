-- Engram schema, version 18: a better first threshold for the BM25 top-k (engram_chunks_bm25_topk, migration 0011).
--
-- Step a of the MaxScore top-k takes a first threshold θ₀ from a few chunks scored exactly: the e-th best of the
-- 2e chunks with the best lower bounds among those read. Migration 0011 read the head of every list (the highest
-- impacts: short chunks holding one query word often). The chunks that top a query of several words hold several of
-- them, rarely at the head of any one list, so θ₀ came out low and few lists could be skipped. Now the rarest lists
-- are read whole (4,096 postings in all, at most, ascending document frequency) and only the others by their heads:
-- the chunks holding several rare query words are among the candidates, θ₀ is higher, and more of the common words'
-- long lists are skipped. Only θ₀ changes: the function still returns the exhaustive scorer's rows (test_store_search
-- checks it). benchmarks/search.py at 100,000 chunks, the function alone, interleaved with the previous one (30
-- queries each): 2 words p50 15.2 → 8.5 ms, p95 64.8 → 37.1 ms; 12 words p50 61.9 → 53.3 ms, p95 131 → 110 ms;
-- the same rows for every query.

CREATE OR REPLACE FUNCTION engram_chunks_bm25_topk(stores text[], terms text[], idfs float8[], avgdl float8, k integer,
                                        exact integer DEFAULT NULL, filter_sql text DEFAULT NULL,
                                        seed integer DEFAULT 64)
    RETURNS TABLE (chunk_id bigint, score float8)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e integer := least(coalesce(exact, k), k);
    -- The lists, one per (store, query lexeme) with postings.
    l_part integer[];  l_store integer[];  l_term integer[];  l_w float8[];  l_g float8[];  l_df float8[];
    l_ub float8[];  l_skip boolean[];
    n_lists integer;  n_stores integer;  per_list integer;
    s_skip float8[];  skipped_df float8;  budget float8;
    i integer;  s integer;
    -- Candidates, by upper bound (descending).
    c_ids bigint[];  c_ub float8[];  c_lb float8[];  c_st integer[];  n_cand integer;  n_live integer;
    t_ids bigint[];  t_ub float8[];
    scored bigint[] := '{}';
    top_ids bigint[] := '{}';  top_scores float8[] := '{}';
    theta float8 := 0;  theta_lb float8;
    pos integer;  slice integer;  last integer;  batch_ids bigint[];
    scoring text;
    whole integer[];
BEGIN
    IF k < 1 OR coalesce(array_length(terms, 1), 0) = 0 THEN
        RETURN;
    END IF;
    -- A stored impact times w = idf · max(1, avgdl / avgdl_ref) bounds its BM25 component now from above, times
    -- g = idf · min(1, avgdl / avgdl_ref) from below (migration 0009); ub: the list's highest component.
    SELECT array_agg(x.part ORDER BY x.part, x.t), array_agg(x.st ORDER BY x.part, x.t),
           array_agg(x.t ORDER BY x.part, x.t), array_agg(x.w ORDER BY x.part, x.t),
           array_agg(x.g ORDER BY x.part, x.t), array_agg(x.df ORDER BY x.part, x.t),
           array_agg(x.w * x.top ORDER BY x.part, x.t), max(x.st)
    INTO l_part, l_store, l_term, l_w, l_g, l_df, l_ub, n_stores
    FROM (SELECT s.partition_key AS part, dense_rank() OVER (ORDER BY s.partition_key)::integer AS st, t.i AS t,
                 idfs[t.i] * greatest(1.0, avgdl / s.avgdl_ref) * (1 + 1e-6) AS w,
                 idfs[t.i] * least(1.0, avgdl / s.avgdl_ref) * (1 - 1e-6) AS g, ks.df::float8 AS df,
                 (SELECT max(cp.impact) FROM chunk_postings cp
                  WHERE cp.partition_key = s.partition_key AND cp.lexeme = terms[t.i]) AS top
          FROM vector_stores s CROSS JOIN generate_subscripts(terms, 1) AS t(i)
          JOIN keyword_stats ks ON ks.vector_store_id = s.id AND ks.lexeme = terms[t.i]
          WHERE s.id = ANY(stores) AND s.avgdl_ref IS NOT NULL AND ks.df > 0) AS x
    WHERE x.top IS NOT NULL;
    IF l_part IS NULL THEN
        RETURN;
    END IF;
    n_lists := array_length(l_part, 1);
    -- Exact scores under a filter (dynamic: the filter is SQL text); without one, engram_chunks_bm25_merge.
    scoring := 'SELECT array_agg(id ORDER BY s DESC, id), array_agg(s ORDER BY s DESC, id) FROM ('
               || 'SELECT id, s FROM (SELECT unnest($6::bigint[]) AS id, unnest($7::float8[]) AS s UNION ALL '
               || 'SELECT c.id, (SELECT coalesce(sum($2[array_position($1, t.lexeme)] * t.tf * 1.9 '
               || '/ (t.tf + 0.9 * (0.6 + 0.4 * c.keyword_length / $3))), 0) '
               || 'FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf '
               || 'FROM unnest(ts_filter(setweight(c.keywords, ''A'', $1), ''{a}'')) AS u) AS t) AS s '
               || 'FROM chunks c WHERE c.id = ANY($4) AND c.vector_store_id = ANY($5)'
               || coalesce(' AND (' || filter_sql || ')', '')
               || ') AS a WHERE s > 0 ORDER BY s DESC, id LIMIT $8) AS top';

    -- a. θ₀ from the rarest lists and the heads of the others (unless the lists are short enough to read whole).
    IF (SELECT sum(x) FROM unnest(l_df) AS x) > 4096 THEN
        per_list := greatest(seed, 1024 / n_lists);
        -- The rarest lists whole (4,096 postings in all, at most), the heads of the others.
        SELECT array_agg(w.i) INTO whole FROM (
            SELECT g.i, sum(l_df[g.i]) OVER (ORDER BY l_df[g.i], g.i) AS run
            FROM generate_subscripts(l_part, 1) AS g(i)) AS w WHERE w.run <= 4096;
        whole := coalesce(whole, '{}');
        SELECT array_agg(d.id ORDER BY d.lb DESC, d.id) INTO c_ids
        FROM (SELECT h.chunk_id AS id, sum(l_g[l.i] * h.impact) AS lb
              FROM generate_subscripts(l_part, 1) AS l(i)
              CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                  WHERE cp.partition_key = l_part[l.i] AND cp.lexeme = terms[l_term[l.i]]
                                  ORDER BY cp.impact DESC, cp.chunk_id DESC
                                  LIMIT CASE WHEN l.i = ANY(whole) THEN NULL ELSE per_list END) AS h
              GROUP BY h.chunk_id) AS d;
        batch_ids := c_ids[1:2 * e];
        IF filter_sql IS NULL THEN
            SELECT m.merged_ids, m.merged_scores INTO top_ids, top_scores
            FROM engram_chunks_bm25_merge(terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k) AS m;
        ELSE
            EXECUTE scoring INTO top_ids, top_scores USING terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k;
        END IF;
        top_ids := coalesce(top_ids, '{}');
        top_scores := coalesce(top_scores, '{}');
        scored := batch_ids;
        IF array_length(top_ids, 1) >= e THEN
            theta := top_scores[e];
        END IF;
    END IF;

    -- b. Skip what cannot reach θ₀ (per store: a chunk belongs to one), read the rest whole.
    l_skip := array_fill(false, ARRAY[n_lists]);
    s_skip := array_fill(0::float8, ARRAY[n_stores]);
    IF theta > 0 THEN
        FOR s IN 1 .. n_stores LOOP
            budget := theta * (1 - 1e-9);
            FOR i IN SELECT g.i FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_store[g.i] = s
                     ORDER BY l_df[g.i] / l_ub[g.i] DESC, g.i LOOP
                CONTINUE WHEN l_ub[i] >= budget;
                l_skip[i] := true;
                budget := budget - l_ub[i];
                s_skip[s] := s_skip[s] + l_ub[i];
            END LOOP;
        END LOOP;
    END IF;
    SELECT coalesce(sum(l_df[g.i]), 0) INTO skipped_df FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i];
    -- Each chunk of the lists read: upper bound (its components plus the skipped lists' maxima) and lower bound.
    -- θ rises to the e-th best lower bound (not under a filter, which a chunk may fail). Kept: the chunks whose
    -- upper bound reaches θ and, for ranks e+1…k, the 2k best upper bounds.
    WITH a AS MATERIALIZED (
             SELECT p.chunk_id AS id, sum(l_w[l.i] * p.impact) + s_skip[min(l_store[l.i])] AS ub,
                    sum(l_g[l.i] * p.impact) AS lb, min(l_store[l.i]) AS st
             FROM generate_subscripts(l_part, 1) AS l(i)
             CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                 WHERE cp.partition_key = l_part[l.i] AND cp.lexeme = terms[l_term[l.i]]) AS p
             WHERE NOT l_skip[l.i]
             GROUP BY p.chunk_id),
         t AS (SELECT greatest(theta, CASE WHEN filter_sql IS NULL THEN
                   coalesce((SELECT a.lb FROM a ORDER BY a.lb DESC OFFSET e - 1 LIMIT 1), 0) ELSE 0 END) AS v)
    SELECT array_agg(x.id ORDER BY x.ub DESC, x.id), array_agg(x.ub ORDER BY x.ub DESC, x.id),
           array_agg(x.lb ORDER BY x.ub DESC, x.id), array_agg(x.st ORDER BY x.ub DESC, x.id), (SELECT v FROM t)
    INTO c_ids, c_ub, c_lb, c_st, theta
    FROM (SELECT a.* FROM a, t WHERE a.ub >= t.v
          UNION
          SELECT f.* FROM (SELECT * FROM a ORDER BY a.ub DESC, a.id
                           LIMIT CASE WHEN e < k THEN 2 * k ELSE 0 END) AS f) AS x;
    n_cand := coalesce(array_length(c_ids, 1), 0);

    -- c. Many chunks within reach of θ: their components from the skipped lists (a posting read costs ~1/20 of
    --    an exact score). The ids go as a parameter of a dynamic statement, planned with their values, so the
    --    = ANY is hashed.
    SELECT count(*) INTO n_live FROM unnest(c_ub) AS u WHERE u >= theta;
    IF skipped_df > 0 AND n_live * 20 > skipped_df THEN
        t_ids := c_ids[n_live + 1:n_cand];  -- (the rest and their bounds, kept for ranks e+1…k)
        t_ub := c_ub[n_live + 1:n_cand];
        EXECUTE 'SELECT array_agg(a.id ORDER BY a.ub DESC, a.id), array_agg(a.ub ORDER BY a.ub DESC, a.id), '
                || 'array_agg(a.lb ORDER BY a.ub DESC, a.id) '
                || 'FROM (SELECT u.id, sum(u.up) AS ub, sum(u.lb) AS lb FROM ('
                || 'SELECT * FROM unnest($1, $2, $3) AS c(id, up, lb) UNION ALL '
                || 'SELECT cp.chunk_id, $6[l.i] * cp.impact, $7[l.i] * cp.impact '
                || 'FROM unnest($4, $5, $8) AS l(i, part, lexeme) CROSS JOIN LATERAL ('
                || 'SELECT cp.chunk_id, cp.impact FROM chunk_postings cp WHERE cp.partition_key = l.part '
                || 'AND cp.lexeme = l.lexeme AND cp.chunk_id = ANY($1)) AS cp) AS u GROUP BY u.id) AS a'
            INTO c_ids, c_ub, c_lb
            USING c_ids[1:n_live],
                  (SELECT array_agg(x.ub - s_skip[x.st]) FROM unnest(c_ub[1:n_live], c_st[1:n_live]) AS x(ub, st)),
                  c_lb[1:n_live],
                  (SELECT array_agg(g.i) FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i]),
                  (SELECT array_agg(l_part[g.i]) FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i]),
                  l_w, l_g,
                  (SELECT array_agg(terms[l_term[g.i]]) FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i]);
        IF filter_sql IS NULL AND c_lb IS NOT NULL THEN
            SELECT v INTO theta_lb FROM unnest(c_lb) AS v ORDER BY v DESC OFFSET e - 1 LIMIT 1;
            theta := greatest(theta, coalesce(theta_lb, 0));
        END IF;
        IF e < k THEN  -- the chunks out of reach of θ may still fill ranks e+1…k
            SELECT array_agg(a.id ORDER BY a.ub DESC, a.id), array_agg(a.ub ORDER BY a.ub DESC, a.id)
            INTO c_ids, c_ub
            FROM (SELECT * FROM unnest(c_ids, c_ub) AS x(id, ub)
                  UNION ALL SELECT * FROM unnest(t_ids, t_ub) AS y(id, ub)) AS a;
        END IF;
        n_cand := coalesce(array_length(c_ids, 1), 0);
    END IF;

    -- Exact scores, best upper bound first, while one can still reach θ — and, past the first e, until k rows.
    pos := 1;
    slice := greatest(e, 16);
    WHILE pos <= n_cand AND (c_ub[pos] >= theta OR coalesce(array_length(top_ids, 1), 0) < k) LOOP
        last := least(n_cand, pos + slice - 1);
        SELECT array_agg(x.id) INTO batch_ids FROM unnest(c_ids[pos:last], c_ub[pos:last]) AS x(id, ub)
        WHERE (x.ub >= theta OR coalesce(array_length(top_ids, 1), 0) < k) AND x.id NOT IN (SELECT unnest(scored));
        IF batch_ids IS NOT NULL THEN
            IF filter_sql IS NULL THEN
                SELECT m.merged_ids, m.merged_scores INTO top_ids, top_scores
                FROM engram_chunks_bm25_merge(terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k) AS m;
            ELSE
                EXECUTE scoring INTO top_ids, top_scores USING terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k;
            END IF;
            top_ids := coalesce(top_ids, '{}');
            top_scores := coalesce(top_scores, '{}');
            scored := scored || batch_ids;
            IF array_length(top_ids, 1) >= e THEN
                theta := greatest(theta, top_scores[e]);
            END IF;
        END IF;
        pos := last + 1;
        slice := slice * 2;
    END LOOP;

    -- Fewer than k rows while chunks only the skipped lists hold were never looked at: they cannot reach the
    -- top e (their bound is below θ₀), but fill ranks e+1…k, best bound first.
    IF coalesce(array_length(top_ids, 1), 0) < k AND skipped_df > 0 THEN
        SELECT array_agg(a.id ORDER BY a.ub DESC, a.id) INTO batch_ids
        FROM (SELECT p.chunk_id AS id, sum(l_w[l.i] * p.impact) AS ub
              FROM generate_subscripts(l_part, 1) AS l(i)
              CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                  WHERE cp.partition_key = l_part[l.i] AND cp.lexeme = terms[l_term[l.i]]) AS p
              WHERE l_skip[l.i] AND p.chunk_id NOT IN (SELECT unnest(scored))
              GROUP BY p.chunk_id ORDER BY 2 DESC, 1 LIMIT 2 * k) AS a;
        IF batch_ids IS NOT NULL THEN
            IF filter_sql IS NULL THEN
                SELECT m.merged_ids, m.merged_scores INTO top_ids, top_scores
                FROM engram_chunks_bm25_merge(terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k) AS m;
            ELSE
                EXECUTE scoring INTO top_ids, top_scores USING terms, idfs, avgdl, batch_ids, stores, top_ids, top_scores, k;
            END IF;
            top_ids := coalesce(top_ids, '{}');
            top_scores := coalesce(top_scores, '{}');
        END IF;
    END IF;
    RETURN QUERY SELECT unnest(top_ids), unnest(top_scores);
END $$;
