-- Engram schema, version 30: recall whose cost does not grow with the size of a user's history (issue 31;
-- chalicelib/search/partitions.py, docs/memory.md "Long histories").
--
-- One user's memories (and, apart, their exchanges) are a *partition*. Its rows up to `indexed_through` are its
-- *body*: a backend's writer has indexed them (chalicelib/search/backends/partition_sync.py). The rows after it
-- are its *tail*, read exactly in Postgres on every search, as every row was before. A search merges the two, so a
-- memory is searchable the moment its add commits, and the body's indexes bound the work for the rest:
--
-- * BM25 statistics of the body (row count, total length, document frequency per lexeme) are kept here for every
--   backend, by the writer; the tail's are computed on the fly. Together they are the statistics of every row of
--   the user (any status), so every backend scores with the same numbers;
-- * pgvector's body: impact-ordered postings (memory_postings, as chunk_postings: migration 0009), of which a
--   search reads a bounded number, rarest words first (chalicelib/search/backends/pgvector_partitions.py), and the
--   vectors in memory_vectors under an HNSW index per dimension. Each vector is stored with its partition's *tag* appended
--   (engram_partition_tag): 64 more dimensions holding a fixed random unit vector of the partition, times 2. For two
--   rows of one partition the cosine of the tagged vectors is (a·b + 4) / 5, an increasing function of their own
--   cosine a·b, so the order within a partition is unchanged; rows of other partitions are far (their tags are
--   nearly orthogonal), so the graph keeps each partition together and a search walks its own partition's part of it
--   (what Qdrant's per-tenant graphs, payload_m, do) instead of visiting ~limit / share rows of everyone's;
-- * Qdrant's body: points in <prefix>memories_<dim> (chalicelib/search/backends/qdrant_partitions.py).
--
-- Indexing costs adds nothing: the writer runs after the add (backends whose writes are cheap) or in the
-- index_memories job. A change to a body row (a revision, a delete) takes it out of the body at once
-- (memory_index_pending; the triggers below), so nothing stale is ever ranked; the writer puts it back, or removes it
-- from the backend.

CREATE TABLE memory_partitions (
    partition_key    integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    corpus           text NOT NULL CHECK (corpus IN ('memories', 'exchanges')),
    user_id          text NOT NULL,
    backend          text NOT NULL CHECK (backend ~ '^[a-z][a-z0-9_]*$'),  -- where the body's indexes live
    indexed_through  bigint NOT NULL DEFAULT 0,        -- the body: rows with seq <= this, less the pending ones
    body_rows        bigint NOT NULL DEFAULT 0,
    body_length      bigint NOT NULL DEFAULT 0,        -- lexemes in all
    avgdl_ref        real CHECK (avgdl_ref > 0),       -- the average length the postings' impacts were computed with
    speakers         text[] NOT NULL DEFAULT '{}',     -- distinct metadata.speaker of the body (at most 1,000)
    dimensions       integer[] NOT NULL DEFAULT '{}',  -- the embedding dimensions of the body's rows
    moving_to        text CHECK (moving_to ~ '^[a-z][a-z0-9_]*$'),  -- engram memory reindex --backend, under way
    moved_through    bigint NOT NULL DEFAULT 0,        -- the body rows the move has written so far
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, corpus, user_id)
);

CREATE TABLE memory_keyword_stats (
    partition_key  integer NOT NULL REFERENCES memory_partitions(partition_key) ON DELETE CASCADE,
    lexeme         text NOT NULL,
    df             integer NOT NULL,
    tenant_id      text NOT NULL,
    PRIMARY KEY (partition_key, lexeme)
);

-- (tenant_id last in the key: the row-level security policy is an index condition, as for chunk_postings.)
CREATE TABLE memory_postings (
    partition_key  integer NOT NULL REFERENCES memory_partitions(partition_key) ON DELETE CASCADE,
    lexeme         text NOT NULL,
    impact         real NOT NULL,
    seq            bigint NOT NULL,
    tenant_id      text NOT NULL,
    PRIMARY KEY (partition_key, lexeme, impact, seq, tenant_id)
);

CREATE TABLE memory_vectors (
    partition_key  integer NOT NULL REFERENCES memory_partitions(partition_key) ON DELETE CASCADE,
    seq            bigint NOT NULL,
    tenant_id      text NOT NULL,
    embedding_dim  integer NOT NULL,
    tagged         vector NOT NULL,                    -- the embedding, then the partition's tag
    PRIMARY KEY (partition_key, seq)
);
ALTER TABLE memory_vectors ALTER COLUMN tagged SET STORAGE MAIN;

-- Body rows changed or deleted since they were indexed: out of the body until the writer has dealt with them.
CREATE TABLE memory_index_pending (
    partition_key  integer NOT NULL REFERENCES memory_partitions(partition_key) ON DELETE CASCADE,
    seq            bigint NOT NULL,
    tenant_id      text NOT NULL,
    PRIMARY KEY (partition_key, seq)
);

-- Where the index_memories job has looked for new rows (one row per corpus; the job runs as the owner).
CREATE TABLE memory_index_cursor (
    corpus    text PRIMARY KEY CHECK (corpus IN ('memories', 'exchanges')),
    last_seq  bigint NOT NULL DEFAULT 0
);

-- A tenant's memories and exchanges live on this backend (NULL: ENGRAM_MEMORY_BACKEND).
ALTER TABLE tenants ADD COLUMN memory_backend text CHECK (memory_backend ~ '^[a-z][a-z0-9_]*$');

GRANT SELECT, INSERT, UPDATE, DELETE ON memory_partitions, memory_keyword_stats, memory_postings, memory_vectors,
    memory_index_pending TO engram_app;
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memory_partitions', 'memory_keyword_stats', 'memory_postings', 'memory_vectors',
                             'memory_index_pending'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I USING (tenant_id = engram_current_tenant()) '
                       'WITH CHECK (tenant_id = engram_current_tenant())', t);
    END LOOP;
END $$;

-- A user's rows in write order (the tail: rows after the body), and the rows one add stored together in write
-- order (a candidate's neighbours: two index probes each, instead of numbering the whole scope).
DROP INDEX memories_user;
CREATE INDEX memories_user ON memories (tenant_id, user_id, seq) WHERE user_id IS NOT NULL;
CREATE INDEX memories_session ON memories (tenant_id, user_id, valid_from, source_kind, coalesce(source_id, ''), seq)
    WHERE user_id IS NOT NULL;
DROP INDEX exchanges_user;
CREATE INDEX exchanges_user ON exchanges (tenant_id, user_id, seq) WHERE user_id IS NOT NULL;

-- Version 27's indexes (a GIN over every memory's lexemes, an HNSW per dimension over the memories table, an add's
-- rows) cost every add their upkeep and are replaced by the above (issue 31: adds fell from ~1,170 to ~200/s).
DROP INDEX IF EXISTS memories_keywords;
DROP INDEX IF EXISTS memories_add;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
             WHERE i.indrelid = 'memories'::regclass AND c.relname ~ '^memories_hnsw_[0-9]+$' LOOP
        EXECUTE format('DROP INDEX %I', r.relname);
    END LOOP;
END $$;
DROP FUNCTION IF EXISTS engram_ensure_memory_hnsw_index(integer, text, integer, integer);

-- A partition's tag: 64 numbers, a pseudo-random direction fixed by the partition key (md5 of key:i), of length 2.
CREATE FUNCTION engram_partition_tag(p integer) RETURNS real[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH r AS (SELECT i, ('x' || substr(md5(p::text || ':' || i::text), 1, 8))::bit(32)::bigint::float8
                         / 4294967295.0 - 0.5 AS v
               FROM generate_series(1, 64) AS i)
    SELECT array_agg((2.0 * r.v / n.norm)::real ORDER BY r.i) FROM r, (SELECT sqrt(sum(v * v)) AS norm FROM r) AS n
$$;

-- The HNSW index over the tagged vectors of one embedding dimension (dimension + 64 tagged), over halfvec where
-- pgvector has it (as chunks_hnsw_<dim>). Created by the writer on a dimension's first body; the API's role does not
-- own the table.
CREATE FUNCTION engram_ensure_memory_vectors_index(p_dim integer, p_kind text, p_m integer, p_ef_construction integer)
    RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF p_kind NOT IN ('vector', 'halfvec') OR p_dim < 1 OR p_m < 2 OR p_ef_construction < 4 THEN
        RAISE EXCEPTION 'engram_ensure_memory_vectors_index: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON memory_vectors USING hnsw ((tagged::%s(%s)) %s_cosine_ops) '
        'WITH (m = %s, ef_construction = %s) WHERE embedding_dim = %s',
        'memory_vectors_hnsw_' || p_dim, p_kind, p_dim + 64, p_kind, p_m, p_ef_construction, p_dim);
END $$;
GRANT EXECUTE ON FUNCTION engram_ensure_memory_vectors_index(integer, text, integer, integer) TO engram_app;

-- Take rows out of their partitions' bodies (a revision changed them, or they were deleted): their statistics,
-- postings and tagged vectors go (with the lexemes, and the speakers once the body is empty: a purge leaves no
-- text), and they wait in memory_index_pending for the writer (which indexes them again, or deletes them from a
-- backend outside Postgres). `gone`: (partition_key, seq, keywords, keyword_length) of the
-- rows, already restricted to body rows not yet pending.
CREATE FUNCTION engram_partition_unindex(gone jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF gone IS NULL OR jsonb_array_length(gone) = 0 THEN
        RETURN;
    END IF;
    UPDATE memory_partitions p SET body_rows = p.body_rows - g.n, body_length = p.body_length - g.len,
                                   speakers = CASE WHEN p.body_rows - g.n <= 0 THEN '{}' ELSE p.speakers END,
                                   updated_at = now()
    FROM (SELECT u.partition_key, count(*) AS n, sum(u.keyword_length) AS len
          FROM jsonb_to_recordset(gone) AS u(partition_key integer, keyword_length integer) GROUP BY 1) AS g
    WHERE p.partition_key = g.partition_key;
    UPDATE memory_keyword_stats k SET df = k.df - g.n
    FROM (SELECT u.partition_key, t.lexeme, count(*) AS n
          FROM jsonb_to_recordset(gone) AS u(partition_key integer, keywords tsvector), unnest(u.keywords) AS t
          GROUP BY 1, 2) AS g
    WHERE k.partition_key = g.partition_key AND k.lexeme = g.lexeme;
    -- (A lexeme no body row holds any more goes: a purged user's words leave no trace.)
    DELETE FROM memory_keyword_stats k USING (SELECT DISTINCT u.partition_key FROM jsonb_to_recordset(gone)
                                              AS u(partition_key integer)) AS g
    WHERE k.partition_key = g.partition_key AND k.df <= 0;
    DELETE FROM memory_postings p
    USING (SELECT u.partition_key, t.lexeme, u.seq
           FROM jsonb_to_recordset(gone) AS u(partition_key integer, seq bigint, keywords tsvector),
                unnest(u.keywords) AS t) AS g
    WHERE p.partition_key = g.partition_key AND p.lexeme = g.lexeme AND p.seq = g.seq;
    DELETE FROM memory_vectors v USING jsonb_to_recordset(gone) AS g(partition_key integer, seq bigint)
    WHERE v.partition_key = g.partition_key AND v.seq = g.seq;
    INSERT INTO memory_index_pending (partition_key, seq, tenant_id)
    SELECT g.partition_key, g.seq, p.tenant_id FROM jsonb_to_recordset(gone) AS g(partition_key integer, seq bigint)
    JOIN memory_partitions p USING (partition_key)
    ON CONFLICT DO NOTHING;
END $$;

-- After rows of memories or exchanges (TG_ARGV[0]: the corpus) are deleted: the body rows among them leave it.
CREATE FUNCTION engram_partition_rows_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM engram_partition_unindex((
        SELECT jsonb_agg(jsonb_build_object('partition_key', p.partition_key, 'seq', o.seq,
                                            'keywords', o.keywords, 'keyword_length', o.keyword_length))
        FROM old_rows o
        JOIN memory_partitions p ON p.tenant_id = o.tenant_id AND p.corpus = TG_ARGV[0] AND p.user_id = o.user_id
        WHERE o.user_id IS NOT NULL AND o.seq <= p.indexed_through
          AND NOT EXISTS (SELECT 1 FROM memory_index_pending x
                          WHERE x.partition_key = p.partition_key AND x.seq = o.seq)));
    RETURN NULL;
END $$;

-- After a body row's text or embedding changed (a revision): it leaves the body until indexed again.
CREATE FUNCTION engram_partition_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM engram_partition_unindex((
        SELECT jsonb_agg(jsonb_build_object('partition_key', p.partition_key, 'seq', OLD.seq,
                                            'keywords', OLD.keywords, 'keyword_length', OLD.keyword_length))
        FROM memory_partitions p
        WHERE p.tenant_id = OLD.tenant_id AND p.corpus = TG_ARGV[0] AND p.user_id = OLD.user_id
          AND OLD.seq <= p.indexed_through
          AND NOT EXISTS (SELECT 1 FROM memory_index_pending x
                          WHERE x.partition_key = p.partition_key AND x.seq = OLD.seq)));
    RETURN NULL;
END $$;

CREATE TRIGGER memories_partition_deleted AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION engram_partition_rows_deleted('memories');
CREATE TRIGGER memories_partition_changed AFTER UPDATE OF keywords, embedding ON memories
    FOR EACH ROW WHEN (OLD.user_id IS NOT NULL AND (OLD.keywords IS DISTINCT FROM NEW.keywords
                                                    OR OLD.embedding IS DISTINCT FROM NEW.embedding))
    EXECUTE FUNCTION engram_partition_row_changed('memories');
CREATE TRIGGER exchanges_partition_deleted AFTER DELETE ON exchanges REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION engram_partition_rows_deleted('exchanges');
