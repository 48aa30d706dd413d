-- Engram schema, version 25: long queries (issue 23) — the BM25 top-k lets fewer chunks through its read and
-- completes them one skipped list at a time.
--
-- engram_chunks_bm25_topk (migrations 0011 and 0018) skips the lists whose maxima add up to less than θ₀ (MaxScore),
-- reads the others whole, and adds to every chunk it met there what the skipped lists hold for it. The skipped
-- maxima add up to nearly θ₀, so almost every chunk of the lists read is within reach of θ: with a 12-word query at
-- 100,000 chunks, 6,000 to 11,000 chunks went on, in arrays, to a completion that read every posting of the skipped
-- lists (the common words, 55,000–70,000 of the query's ~100,000 postings), and the cost was in handling those
-- chunks (a few µs each per statement), more than in the postings (a scan that emits only the postings of given
-- chunks takes ~0.2 µs per posting; one that aggregates them, ~0.5–1 µs). Now:
--
-- 1. The skippable list with the highest maximum (per store) is read with the others, so its maximum leaves every
--    chunk's bound, and only the chunks whose bound still reaches θ₀ leave the aggregate (HAVING): with 12 words,
--    400–1,300 chunks instead of 6,000–11,000, for ~10 % more postings aggregated.
-- 2. The chunks in reach are completed from the other skipped lists one list at a time, highest maximum first
--    (a chunk the list does not hold loses that maximum); after each list θ rises to the e-th best lower bound and
--    the chunks whose bound fell below it drop out. A list is read only while that costs less than scoring the
--    chunks still in reach exactly (`exact_cost` postings per exact score, below).
--
-- The first `exact` rows are still the exhaustive scorer's (tests/test_keyword_pruning.py and test_store_search
-- check it). Rows e+1…k (exact < k: a fusion input needs an exact head and a good tail, search.ranking) are the best
-- exact scores among the chunks in reach, those that dropped out while completing and the next best chunks of θ₀'s
-- read (the rarer words), until k rows. Measured in docs/benchmarks.md, "Long queries".

CREATE OR REPLACE FUNCTION engram_chunks_bm25_topk(stores text[], terms text[], idfs float8[], avgdl float8, k integer,
                                        exact integer DEFAULT NULL, filter_sql text DEFAULT NULL,
                                        seed integer DEFAULT 64)
    RETURNS TABLE (chunk_id bigint, score float8)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e integer := least(coalesce(exact, k), k);
    -- An exact score costs about as much as this many postings read by a completion (a scan emitting the postings
    -- of given chunks): on benchmarks/search.py's 100k data set, 19–54 µs against 0.30–0.49 µs (2026-11-27, load
    -- average 3; benchmarks/keyword_profile.py breaks a query down).
    exact_cost CONSTANT integer := 64;
    -- The lists, one per (store, query lexeme) with postings.
    l_part integer[];  l_store integer[];  l_lex text[];  l_w float8[];  l_g float8[];  l_df float8[];
    l_ub float8[];  l_skip boolean[];  l_head integer[];
    n_lists integer;  n_stores integer;  per_list integer;
    s_skip float8[];  s_ratio float8[];  skipped_df float8;  budget float8;
    i integer;  s integer;  opened integer;
    -- Chunks in reach of θ (n_cand after the read, n_live after completing), by upper bound (descending), with
    -- lower bounds and stores; t_ids: more candidates for ranks e+1…k; completed: skipped lists completed for the
    -- chunks in reach, and their postings.
    c_ids bigint[];  c_ub float8[];  c_lb float8[];  c_st integer[];  n_cand integer := 0;  n_live integer := 0;
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
    -- g / w is the same for every list of a store: a chunk's lower bound is its upper-weighted sum times it.
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

    -- a. θ₀ from the rarest lists and the heads of the others (unless the lists are short enough to read whole):
    --    the 2e chunks with the best lower bounds there, scored exactly; the next 2k are candidates for ranks e+1…k.
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
        IF e < k THEN
            t_ids := coalesce(c_ids[2 * e + 1:2 * e + 2 * k], '{}');
        END IF;
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

    -- b. Skip what cannot reach θ₀ (per store: a chunk belongs to one) — except, per store, the skippable list with
    --    the highest maximum: read with the others, it takes its maximum out of every chunk's bound, so only the
    --    chunks holding enough of the query reach θ₀ (a fifth to a twentieth as many with 12 words).
    l_skip := array_fill(false, ARRAY[n_lists]);
    s_skip := array_fill(0::float8, ARRAY[n_stores]);
    IF theta > 0 THEN
        FOR s IN 1 .. n_stores LOOP
            budget := theta * (1 - 1e-9);
            opened := NULL;
            FOR i IN SELECT g.i FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_store[g.i] = s
                     ORDER BY l_df[g.i] / l_ub[g.i] DESC, g.i LOOP
                CONTINUE WHEN l_ub[i] >= budget;
                l_skip[i] := true;
                budget := budget - l_ub[i];
                s_skip[s] := s_skip[s] + l_ub[i];
                IF opened IS NULL OR l_ub[i] > l_ub[opened] THEN
                    opened := i;
                END IF;
            END LOOP;
            IF opened IS NOT NULL THEN
                l_skip[opened] := false;
                s_skip[s] := s_skip[s] - l_ub[opened];
            END IF;
        END LOOP;
    END IF;
    SELECT coalesce(sum(l_df[g.i]), 0) INTO skipped_df FROM generate_subscripts(l_part, 1) AS g(i) WHERE l_skip[g.i];
    -- c. Read the other lists whole: each chunk's components at the upper weights (part); its upper bound adds the
    --    skipped lists' maxima of its store, its lower bound is part × g / w. Only the chunks whose bound reaches θ₀
    --    leave the aggregate; θ rises to the e-th best lower bound among them (not under a filter, which a chunk may
    --    fail), and those still in reach are kept (c_, by upper bound).
    WITH a AS MATERIALIZED (
             SELECT p.chunk_id AS id, l.st, sum(l.w * p.impact) AS part
             FROM unnest(l_part, l_lex, l_w, l_store, l_skip) AS l(part, lexeme, w, st, skip)
             CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                 WHERE cp.partition_key = l.part AND cp.lexeme = l.lexeme) AS p
             WHERE NOT l.skip
             GROUP BY p.chunk_id, l.st
             HAVING sum(l.w * p.impact) + s_skip[l.st] >= theta),
         t AS MATERIALIZED (SELECT greatest(theta, CASE WHEN filter_sql IS NULL THEN coalesce(
                   (SELECT a.part * s_ratio[a.st] FROM a ORDER BY 1 DESC OFFSET e - 1 LIMIT 1), 0) ELSE 0 END) AS v)
    SELECT array_agg(x.id ORDER BY x.ub DESC, x.id), array_agg(x.ub ORDER BY x.ub DESC, x.id),
           array_agg(x.lb ORDER BY x.ub DESC, x.id), array_agg(x.st ORDER BY x.ub DESC, x.id), (SELECT v FROM t)
    INTO c_ids, c_ub, c_lb, c_st, theta_lb
    FROM (SELECT a.id, a.part + s_skip[a.st] AS ub, a.part * s_ratio[a.st] AS lb, a.st
          FROM a, t WHERE a.part + s_skip[a.st] >= t.v) AS x;
    n_live := coalesce(array_length(c_ids, 1), 0);
    n_cand := n_live;
    theta := greatest(theta, coalesce(theta_lb, 0));

    -- Complete the chunks in reach of θ from the skipped lists, one list at a time, highest maximum first, while
    -- reading the list (a scan that emits only their postings) costs less than scoring them exactly; after each
    -- list θ rises to the e-th best lower bound and the chunks whose upper bound fell below it drop out (they are
    -- candidates for ranks e+1…k). The ids go as a parameter of a dynamic statement, planned with their values,
    -- so the = ANY is hashed.
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
                || 't AS MATERIALIZED (SELECT greatest($11, CASE WHEN $12 THEN coalesce('
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
        IF e < k AND out_ids IS NOT NULL THEN
            t_ids := out_ids || t_ids;
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

    -- e. Ranks e+1…k: the chunks left in reach, those that fell out of reach while completing, then those with
    --    the best lower bounds of step a, not scored yet, until k rows.
    IF e < k THEN
        t_ids := coalesce(c_ids, '{}') || t_ids;
    END IF;
    pos := 1;
    slice := greatest(k - coalesce(array_length(top_ids, 1), 0), 16);  -- (the rows missing, then twice as many)
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

    -- Fewer than k rows while chunks were never looked at (out of reach of θ₀, or held only by the skipped lists):
    -- they cannot reach the top e, but fill ranks e+1…k, best bound first.
    IF coalesce(array_length(top_ids, 1), 0) < k AND theta > 0 THEN
        SELECT array_agg(a.id ORDER BY a.ub DESC, a.id) INTO batch_ids
        FROM (SELECT p.chunk_id AS id, sum(l.w * p.impact) AS ub
              FROM unnest(l_part, l_lex, l_w) AS l(part, lexeme, w)
              CROSS JOIN LATERAL (SELECT cp.chunk_id, cp.impact FROM chunk_postings cp
                                  WHERE cp.partition_key = l.part AND cp.lexeme = l.lexeme) AS p
              WHERE p.chunk_id NOT IN (SELECT unnest(scored))
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
