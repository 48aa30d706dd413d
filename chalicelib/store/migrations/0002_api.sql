-- Engram schema, version 2: what the OpenAI-compatible HTTP API needs on top of the knowledge core —
-- API keys (hashes only), file batches, processing leases (so no file stays in_progress forever), and
-- byte-wise id ordering for cursor pagination (ids are time-ordered, see chalicelib/ids.py).

-- API keys. Only the SHA-256 of a key is stored; the key itself is shown once, at creation.
CREATE TABLE api_keys (
    id            text PRIMARY KEY,                    -- 'key_...'
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name          text,
    key_hash      bytea NOT NULL UNIQUE,               -- sha256 of the full secret key
    key_hint      text NOT NULL,                       -- e.g. 'sk-engram-...abcd', for display only
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- The one way the API's database role resolves a key: it has EXECUTE on this function and no access to api_keys.
CREATE FUNCTION engram_tenant_for_key(p_hash bytea) RETURNS text
    LANGUAGE sql SECURITY DEFINER SET search_path = public
    AS $$ UPDATE api_keys SET last_used_at = now() WHERE key_hash = p_hash AND revoked_at IS NULL
          RETURNING tenant_id $$;

-- File batches (OpenAI 'vector_store.files_batch'). Status and file_counts derive from the member files'
-- vector_store_files rows, so they always agree with the per-file statuses.
CREATE TABLE file_batches (
    id               text PRIMARY KEY,                 -- 'vsfb_...'
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id  text NOT NULL REFERENCES vector_stores(id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    cancelled_at     timestamptz
);
CREATE INDEX file_batches_store ON file_batches (tenant_id, vector_store_id);

CREATE TABLE file_batch_files (
    batch_id         text NOT NULL REFERENCES file_batches(id) ON DELETE CASCADE,
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id  text NOT NULL,
    file_id          text NOT NULL,
    PRIMARY KEY (batch_id, file_id)
);

-- Processing leases. A worker claims an in_progress file by setting lease_expires_at and bumping attempts; a
-- lease that expires (the worker died) lets another worker retry, up to a limit, after which the file is failed.
ALTER TABLE vector_store_files
    ADD COLUMN attempts          integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at  timestamptz;
CREATE INDEX vector_store_files_pending ON vector_store_files (updated_at) WHERE status = 'in_progress';

-- Cursor pagination orders by id byte-wise (ids embed their creation time).
CREATE INDEX files_tenant_id_c ON files (tenant_id, (id COLLATE "C"));
CREATE INDEX vector_stores_tenant_id_c ON vector_stores (tenant_id, (id COLLATE "C"));
CREATE INDEX vector_store_files_store_file_c ON vector_store_files (vector_store_id, (file_id COLLATE "C"));
CREATE INDEX vector_stores_expires_at ON vector_stores (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX files_expires_at ON files (expires_at) WHERE expires_at IS NOT NULL;

-- HNSW index creation for the API's role, which does not own the chunks table. Arguments are validated here;
-- the statement is the one chalicelib/store/vector_stores.py documents (cosine, partial per dimension).
CREATE FUNCTION engram_ensure_hnsw_index(p_dim integer, p_kind text, p_m integer, p_ef_construction integer)
    RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
    AS $$
BEGIN
    IF p_kind NOT IN ('vector', 'halfvec') OR p_dim < 1 OR p_m < 2 OR p_ef_construction < 4 THEN
        RAISE EXCEPTION 'engram_ensure_hnsw_index: bad arguments';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON chunks USING hnsw ((embedding::%s(%s)) %s_cosine_ops) '
        'WITH (m = %s, ef_construction = %s) WHERE embedding_dim = %s',
        'chunks_hnsw_' || p_dim, p_kind, p_dim, p_kind, p_m, p_ef_construction, p_dim);
END $$;
