-- Engram schema, version 25: long queries (issue 23) — the BM25 top-k completes its candidates one skipped list at
-- a time.
--
-- engram_chunks_bm25_topk (migrations 0011 and 0018) skips the lists whose maxima add up to less than θ (MaxScore),
-- reads the others whole, and then, for every chunk still within reach of θ, adds what the skipped lists hold for it.
-- With a 12-word query at 100,000 chunks, 10,000 chunks or more are within reach after the read, and that completion
-- read every posting of the skipped lists: the common words, 55,000 of the query's ~100,000 postings.
--
-- Now the skipped lists complete the chunks in reach one list at a time, the list with the highest maximum first
-- (a chunk it does not hold loses that maximum from its bound). After each list θ rises to the e-th best lower
-- bound and the chunks whose upper bound fell below θ drop out: the first list typically leaves a fifth of them in
-- reach, the second a twentieth. A list is read only while that is cheaper than scoring the chunks still in reach
-- exactly (:EXACT_COST postings per exact score, below); the chunks left are then scored exactly, as before.
-- Nothing else changes: the first `exact` rows are still the exhaustive scorer's (test_store_search checks it).
--
-- Rows e+1…k (exact < k: a fusion input that needs an exact head and a good tail) are the best exact scores among
-- the chunks in reach and then the chunks with the best bounds from the lists read whole, until k rows: chunks that
-- hold the query's rarer words. Measured in benchmarks/search.py and docs/benchmarks.md ("Long queries").

-- Exact scores cost about this many postings read by the completion (a hashed semi-join over one list): on the
-- 100k data set of benchmarks/search.py an exact score took 19–54 µs and a posting 0.30–0.49 µs (2026-11-28,
-- load average 3): ~64.
CREATE OR REPLACE FUNCTION engram_bm25_exact_cost() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 64 $$;

CREATE OR REPLACE FUNCTION engram_chunks_bm25_topk(stores text[], terms text[], idfs float8[], avgdl float8, k integer,
                                        exact integer DEFAULT NULL, filter_sql text DEFAULT NULL,
                                        seed integer DEFAULT 64)
    RETURNS TABLE (chunk_id bigint, score float8)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e integer := least(coalesce(exact, k), k);
    exact_cost integer := engram_bm25_exact_cost();
    -- The lists, one per (store, query lexeme) with postings.
    l_part integer[];  l_store integer[];  l_lex text[];  l_w float8[];  l_g float8[];  l_df float8[];
    l_ub float8[];  l_skip boolean[];  l_head integer[];
    n_lists integer;  n_stores integer;  per_list integer;
    s_skip float8[];  s_ratio float8[];  skipped_df float8;  budget float8;
    i integer;  s integer;
    -- Candidates in reach of θ, by upper bound (descending); t_ids: candidates for ranks e+1…k.
    c_ids bigint[];  c_ub float8[];  c_lb float8[];  c_st integer[];  n_cand integer;  n_live integer;
    t_ids bigint[] := '{}';  out_ids bigint[];
    completed integer := 0;  completed_df float8 := 0;
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
           array_agg(terms[x.t] ORDER BY x.part, x.t), array_agg(x.w ORDER BY x.part, x.t),
           array_agg(x.g ORDER BY x.part, x.t), array_agg(x.df ORDER BY x.part, x.t),
           array_agg(x.w * x.top ORDER BY x.part, x.t), max(x.st)
    INTO l_part, l_store, l_lex, l_w, l_g, l_df, l_ub, n_stores
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
    -- g / w is the same for every list of a store: a chunk's lower bound is its upper weights' sum times it.
    s_ratio := array_fill(1::float8, ARRAY[n_stores]);
    FOR i IN 1 .. n_lists LOOP
        s_ratio[l_store[i]] := l_g[i] / l_w[i];
    END LOOP;
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
        SELECT array_agg(CASE WHEN g.i = ANY(whole) THEN NULL ELSE per_list END ORDER BY g.i) INTO l_head
        FROM generate_subscripts(l_part, 1) AS g(i);
        SELECT array_agg(d.id ORDER BY d.lb DESC, d.id) INTO c_ids
        FROM (SELECT h.chunk_id AS id, sum(l.g * h.impact) AS lb
              FROM unnest(l_part, l_lex, l_g, l_head) AS l(part, lexeme, g, head)
              CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                  WHERE cp.partition_key = l.part AND cp.lexeme = l.lexeme
                                  ORDER BY cp.impact DESC, cp.chunk_id DESC LIMIT l.head) AS h
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
    -- Each chunk of the lists read: the sum of its components at the upper weights; its upper bound adds the
    -- skipped lists' maxima, its lower bound is the sum times g / w. θ rises to the e-th best lower bound (not under
    -- a filter, which a chunk may fail). Kept: the chunks whose upper bound reaches θ (c_, by upper bound) and, for
    -- ranks e+1…k, the 2k best upper bounds (t_ids). (The ordered aggregates share one sort.)
    WITH a AS MATERIALIZED (
             SELECT p.chunk_id AS id, l.st, sum(l.w * p.impact) AS part
             FROM unnest(l_part, l_lex, l_w, l_store, l_skip) AS l(part, lexeme, w, st, skip)
             CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                 WHERE cp.partition_key = l.part AND cp.lexeme = l.lexeme) AS p
             WHERE NOT l.skip
             GROUP BY p.chunk_id, l.st),
         t AS (SELECT greatest(theta, CASE WHEN filter_sql IS NULL THEN coalesce(
                   (SELECT a.part * s_ratio[a.st] FROM a ORDER BY 1 DESC OFFSET e - 1 LIMIT 1), 0) ELSE 0 END) AS v)
    SELECT array_agg(x.id ORDER BY x.ub DESC, x.id) FILTER (WHERE x.ub >= t.v),
           array_agg(x.ub ORDER BY x.ub DESC, x.id) FILTER (WHERE x.ub >= t.v),
           array_agg(x.lb ORDER BY x.ub DESC, x.id) FILTER (WHERE x.ub >= t.v),
           array_agg(x.st ORDER BY x.ub DESC, x.id) FILTER (WHERE x.ub >= t.v),
           (array_agg(x.id ORDER BY x.ub DESC, x.id))[1:CASE WHEN e < k THEN 2 * k ELSE 0 END],
           min(t.v)
    INTO c_ids, c_ub, c_lb, c_st, t_ids, theta_lb
    FROM (SELECT a.id, a.part + s_skip[a.st] AS ub, a.part * s_ratio[a.st] AS lb, a.st FROM a) AS x, t;
    n_live := coalesce(array_length(c_ids, 1), 0);
    n_cand := n_live;
    t_ids := coalesce(t_ids, '{}');
    theta := greatest(theta, coalesce(theta_lb, 0));

    -- c. Complete the chunks in reach of θ from the skipped lists, one list at a time, highest maximum first, while
    --    reading the list costs less than scoring those chunks exactly; after each list θ rises to the e-th best
    --    lower bound and the chunks whose upper bound fell below it drop out (kept for ranks e+1…k). The ids go as
    --    a parameter of a dynamic statement, planned with their values, so the = ANY is hashed.
    FOR i IN SELECT g.i FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i]
             ORDER BY l_ub[g.i] DESC, l_df[g.i], g.i LOOP
        EXIT WHEN n_live = 0;
        CONTINUE WHEN n_live::float8 * exact_cost <= l_df[i];
        EXECUTE 'WITH c AS MATERIALIZED ('
                || 'SELECT c.id, c.ub - CASE WHEN c.st = $5 THEN $6 ELSE 0 END + $7 * coalesce(p.impact, 0) AS ub, '
                || 'c.lb + $8 * coalesce(p.impact, 0) AS lb, c.st '
                || 'FROM unnest($1, $2, $3, $4) AS c(id, ub, lb, st) LEFT JOIN ('
                || 'SELECT cp.chunk_id, cp.impact FROM chunk_postings cp WHERE cp.partition_key = $9 '
                || 'AND cp.lexeme = $10 AND cp.chunk_id = ANY($1)) AS p ON p.chunk_id = c.id), '
                || 't AS (SELECT greatest($11, CASE WHEN $12 THEN coalesce('
                || '(SELECT c.lb FROM c ORDER BY c.lb DESC OFFSET $13 - 1 LIMIT 1), 0) ELSE 0 END) AS v) '
                || 'SELECT array_agg(c.id ORDER BY c.ub DESC, c.id) FILTER (WHERE c.ub >= t.v), '
                || 'array_agg(c.ub ORDER BY c.ub DESC, c.id) FILTER (WHERE c.ub >= t.v), '
                || 'array_agg(c.lb ORDER BY c.ub DESC, c.id) FILTER (WHERE c.ub >= t.v), '
                || 'array_agg(c.st ORDER BY c.ub DESC, c.id) FILTER (WHERE c.ub >= t.v), '
                || 'array_agg(c.id ORDER BY c.ub DESC, c.id) FILTER (WHERE c.ub < t.v), min(t.v) FROM c, t'
            INTO c_ids, c_ub, c_lb, c_st, out_ids, theta
            USING c_ids, c_ub, c_lb, c_st, l_store[i], l_ub[i], l_w[i], l_g[i], l_part[i], l_lex[i],
                  theta, filter_sql IS NULL, e;
        completed := completed + 1;
        completed_df := completed_df + l_df[i];
        n_live := coalesce(array_length(c_ids, 1), 0);
        IF e < k AND out_ids IS NOT NULL THEN  -- (out of reach of the top e, they may still fill ranks e+1…k)
            t_ids := t_ids || out_ids;
        END IF;
    END LOOP;

    -- d. Exact scores, best upper bound first, while one can still reach θ.
    pos := 1;
    slice := greatest(e, 16);
    WHILE pos <= n_live AND c_ub[pos] >= theta LOOP
        last := least(n_live, pos + slice - 1);
        SELECT array_agg(x.id) INTO batch_ids FROM unnest(c_ids[pos:last], c_ub[pos:last]) AS x(id, ub)
        WHERE x.ub >= theta AND x.id NOT IN (SELECT unnest(scored));
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

    -- e. Ranks e+1…k: the chunks left in reach, those with the best upper bounds after the read, then those that
    --    fell out of reach while completing, not scored yet, until k rows.
    IF e < k THEN
        t_ids := c_ids || t_ids;
    END IF;
    pos := 1;
    slice := greatest(k - e, 16);
    WHILE pos <= coalesce(array_length(t_ids, 1), 0) AND coalesce(array_length(top_ids, 1), 0) < k LOOP
        last := pos + slice - 1;
        SELECT array_agg(DISTINCT x.id) INTO batch_ids FROM unnest(t_ids[pos:last]) AS x(id)
        WHERE x.id NOT IN (SELECT unnest(scored));
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
        END IF;
        pos := last + 1;
        slice := slice * 2;
    END LOOP;

    -- Fewer than k rows while chunks only the skipped lists hold were never looked at: they cannot reach the
    -- top e (their bound is below θ₀), but fill ranks e+1…k, best bound first.
    IF coalesce(array_length(top_ids, 1), 0) < k AND skipped_df > 0 THEN
        SELECT array_agg(a.id ORDER BY a.ub DESC, a.id) INTO batch_ids
        FROM (SELECT p.chunk_id AS id, sum(l.w * p.impact) AS ub
              FROM unnest(l_part, l_lex, l_w, l_skip) AS l(part, lexeme, w, skip)
              CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                  WHERE cp.partition_key = l.part AND cp.lexeme = l.lexeme) AS p
              WHERE l.skip AND p.chunk_id NOT IN (SELECT unnest(scored))
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
