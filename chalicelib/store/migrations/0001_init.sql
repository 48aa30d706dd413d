-- Engram schema, version 1: tenants, files, vector stores, vector-store files, chunks, embedding cache and the
-- statistics BM25 needs. Every row carries tenant_id; every query the application issues filters on it.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE tenants (
    id          text PRIMARY KEY,                      -- tenant name, e.g. 'local', 'acme'
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Uploaded files (OpenAI Files API objects). Bytes live in content (local) or S3 (deployed, content NULL).
CREATE TABLE files (
    id          text PRIMARY KEY,                      -- 'file-...'
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    filename    text NOT NULL,
    purpose     text NOT NULL DEFAULT 'assistants',
    bytes       bigint NOT NULL,
    sha256      text NOT NULL,                         -- hex digest of the content
    content     bytea,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE INDEX files_tenant_created ON files (tenant_id, created_at, id);

CREATE TABLE vector_stores (
    id               text PRIMARY KEY,                 -- 'vs_...'
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name             text,
    embedding_model  text NOT NULL,                    -- fixed at creation; other models are refused
    embedding_dim    integer NOT NULL CHECK (embedding_dim > 0),
    metadata         jsonb NOT NULL DEFAULT '{}',
    expires_after    jsonb,                            -- {"anchor": "last_active_at", "days": N}
    expires_at       timestamptz,
    chunk_count      bigint NOT NULL DEFAULT 0,        -- chunks in the store (BM25's N)
    keyword_length   bigint NOT NULL DEFAULT 0,        -- sum of chunks.keyword_length (BM25's avgdl numerator)
    usage_bytes      bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_active_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vector_stores_tenant_created ON vector_stores (tenant_id, created_at, id);
CREATE INDEX vector_stores_tenant_name ON vector_stores (tenant_id, name);

-- A file attached to a vector store (OpenAI 'vector_store.file'); its id is the file's id.
CREATE TABLE vector_store_files (
    tenant_id          text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id    text NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE,
    file_id            text NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    status             text NOT NULL DEFAULT 'in_progress'
                       CHECK (status IN ('in_progress', 'completed', 'cancelled', 'failed')),
    last_error         jsonb,                          -- {"code": ..., "message": ...} when failed
    attributes         jsonb NOT NULL DEFAULT '{}',
    chunking_strategy  jsonb NOT NULL,                 -- resolved: {"type": "static", "static": {...}}
    content_sha256     text,                           -- digest of the ingested bytes (skip unchanged)
    chunk_count        integer NOT NULL DEFAULT 0,
    usage_bytes        bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vector_store_id, file_id)
);
CREATE INDEX vector_store_files_tenant ON vector_store_files (tenant_id, vector_store_id, created_at);
CREATE INDEX vector_store_files_file ON vector_store_files (file_id);

-- BM25 document length: the number of lexeme occurrences in a tsvector.
CREATE FUNCTION engram_tsvector_length(tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0)::integer FROM unnest($1) $$;

-- Chunks. Embeddings of every dimension share one column; each dimension in use gets its own partial HNSW
-- expression index (created by the application: chunks_hnsw_<dim>), the pattern pgvector documents for
-- mixed dimensions.
CREATE TABLE chunks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text NOT NULL,
    vector_store_id  text NOT NULL,
    file_id          text NOT NULL,
    chunk_index      integer NOT NULL,
    text             text NOT NULL,
    token_count      integer NOT NULL,                 -- in the embedder's tokens
    char_start       integer NOT NULL,                 -- [char_start, char_end) in the parsed text
    char_end         integer NOT NULL,
    page_start       integer,
    page_end         integer,
    attributes       jsonb NOT NULL DEFAULT '{}',      -- copy of the file's attributes (filters run here)
    embedding_dim    integer NOT NULL,
    embedding        vector NOT NULL,
    keywords         tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    keyword_length   integer GENERATED ALWAYS AS (engram_tsvector_length(to_tsvector('english', text))) STORED,
    FOREIGN KEY (vector_store_id, file_id) REFERENCES vector_store_files (vector_store_id, file_id) ON DELETE CASCADE
);
CREATE INDEX chunks_scope ON chunks (vector_store_id, file_id, chunk_index);
CREATE INDEX chunks_tenant ON chunks (tenant_id);
CREATE INDEX chunks_keywords ON chunks USING gin (keywords);

-- BM25 document frequencies per vector store: how many chunks of the store contain each lexeme.
CREATE TABLE keyword_stats (
    vector_store_id  text NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE,
    lexeme           text NOT NULL,
    df               integer NOT NULL CHECK (df >= 0),
    PRIMARY KEY (vector_store_id, lexeme)
);

-- Content-hash embedding cache, scoped by tenant so no tenant can learn what another embedded.
CREATE TABLE embedding_cache (
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    model       text NOT NULL,
    sha256      bytea NOT NULL,                        -- sha256 of the chunk text (utf-8)
    embedding   vector NOT NULL,
    PRIMARY KEY (tenant_id, model, sha256)
);
