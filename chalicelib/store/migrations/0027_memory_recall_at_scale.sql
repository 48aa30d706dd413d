-- Engram schema, version 27: memory recall whose cost does not grow with the size of a user's history (issue 31).
--
-- Until now every recall read every memory of its scope three times: the vector leg scanned them exactly, the
-- keyword leg computed BM25's statistics over all of them (twice: its candidates, then the other leg's candidates'
-- scores), and the candidates statement numbered the whole scope to find each candidate's neighbours. Now:
--
-- 1. memories_hnsw_<dim>: a partial HNSW index per embedding dimension (as chunks_hnsw_<dim>, over halfvec where
--    pgvector has it), created on the first add of that dimension through engram_ensure_memory_hnsw_index (the
--    API's role does not own the table). A scope larger than the walk's cost is searched through it with the scope
--    filter and pgvector's iterative scan (chalicelib/search/vector.py); a small one is still read exactly.
-- 2. memories_keywords: a GIN index over the memories' lexemes, so the keyword leg of a large scope reads only the
--    rows holding a query word (chalicelib/search/keyword.py: statistics from a bounded sample of the scope).
-- 3. memories_add: the memories one add stored, in write order, so a candidate's neighbours are two index lookups
--    instead of a window over the whole scope (chalicelib/memory/store.py).

CREATE FUNCTION engram_ensure_memory_hnsw_index(p_dim integer, p_kind text, p_m integer, p_ef_construction integer)
    RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
BEGIN
    IF p_kind NOT IN ('vector', 'halfvec') OR p_dim < 1 OR p_m < 2 OR p_ef_construction < 4 THEN
        RAISE EXCEPTION 'engram_ensure_memory_hnsw_index: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON memories USING hnsw ((embedding::%s(%s)) %s_cosine_ops) '
        'WITH (m = %s, ef_construction = %s) WHERE embedding_dim = %s',
        'memories_hnsw_' || p_dim, p_kind, p_dim, p_kind, p_m, p_ef_construction, p_dim);
END $$;
GRANT EXECUTE ON FUNCTION engram_ensure_memory_hnsw_index(integer, text, integer, integer) TO engram_app;

CREATE INDEX memories_keywords ON memories USING gin (keywords);
CREATE INDEX memories_add ON memories (tenant_id, valid_from, source_kind, coalesce(source_id, ''), seq);

-- The dimensions already stored get their index now (over halfvec from pgvector 0.7 on), not on a request.
DO $$
DECLARE
    halfvec boolean := EXISTS (SELECT 1 FROM pg_type WHERE typname = 'halfvec');
    dim integer;
BEGIN
    FOR dim IN SELECT DISTINCT embedding_dim FROM memories LOOP
        CONTINUE WHEN dim > (CASE WHEN halfvec THEN 4000 ELSE 2000 END);
        PERFORM engram_ensure_memory_hnsw_index(dim, (CASE WHEN halfvec THEN 'halfvec' ELSE 'vector' END), 16, 64);
    END LOOP;
END $$;
