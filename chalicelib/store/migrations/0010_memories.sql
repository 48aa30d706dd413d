-- Engram schema, version 10: agent memory (chalicelib/memory/).
--
-- A memory is one fact, preference, episode … that an agent keeps about a user (user_id), about itself (agent_id)
-- or for one run (run_id) — mem0's three scopes; at least one is set, and every read names its scope. Memories are
-- bi-temporal (after Graphiti): valid_from/valid_to say when the fact held in the world, created_at when Engram
-- learnt it. A contradiction closes the old memory (valid_to, invalidated_by) and adds the new one; an update
-- closes the old version (valid_to, superseded_by) and adds a new version: nothing is ever overwritten, so a
-- search "as of" an instant sees what was true then. Deleting a memory removes its row and scrubs its text from
-- its history; purging a scope removes every row that holds its text (memories, history, jobs, idempotency
-- records, cached embeddings): GDPR deletes that leave no trace.

CREATE TABLE memories (
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,  -- the search corpus's row id
    id                text PRIMARY KEY,                 -- 'mem_...'
    tenant_id         text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    user_id           text,
    agent_id          text,
    run_id            text,
    memory            text NOT NULL CHECK (memory <> ''),
    hash              text NOT NULL,                    -- sha256 hex of the normalised text (exact duplicates)
    memory_type       text NOT NULL DEFAULT 'fact'
                      CHECK (memory_type IN ('fact', 'preference', 'episode', 'procedural', 'working', 'persona',
                                             'knowledge', 'entity', 'process', 'skill')),
    categories        text[] NOT NULL DEFAULT '{}',
    confidence        real NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    importance        real NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
    metadata          jsonb NOT NULL DEFAULT '{}',      -- filterable with vector-store search's filter grammar
    source_kind       text NOT NULL DEFAULT 'api'
                      CHECK (source_kind IN ('api', 'response', 'conversation', 'file', 'job')),
    source_id         text,                             -- the response / conversation / file / job it came from
    valid_from        timestamptz NOT NULL DEFAULT now(),
    valid_to          timestamptz,                      -- when it stopped holding (update or contradiction)
    superseded_by     text,                             -- the newer version (UPDATE)
    invalidated_by    text,                             -- the memory that contradicted it (INVALIDATE)
    pinned            boolean NOT NULL DEFAULT false,   -- exempt from decay and archiving
    access_count      integer NOT NULL DEFAULT 0,
    last_accessed_at  timestamptz,
    expires_at        timestamptz,                      -- gone from reads after this (working memory, TTLs)
    archived_at       timestamptz,                      -- hidden from recall, restorable
    consolidated_into text,                             -- merged into that memory (consolidation), restorable
    verified          boolean NOT NULL DEFAULT false,
    source_type       text CHECK (source_type IN ('user_stated', 'inferred', 'asset_derived')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    embedding_model   text NOT NULL,
    embedding_dim     integer NOT NULL CHECK (embedding_dim > 0),
    embedding         vector NOT NULL,
    keywords          tsvector NOT NULL,                -- computed once by the writer (speaker + text)
    keyword_length    integer NOT NULL,
    CHECK (user_id IS NOT NULL OR agent_id IS NOT NULL OR run_id IS NOT NULL)
);
CREATE INDEX memories_user ON memories (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX memories_agent ON memories (tenant_id, agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX memories_run ON memories (tenant_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX memories_hash ON memories (tenant_id, hash);
CREATE INDEX memories_created ON memories (tenant_id, created_at, id);
CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;

-- Every change of a memory (ADD, UPDATE, INVALIDATE, DELETE, ARCHIVE, RESTORE, ...), with the text before and
-- after. No foreign key: a deleted memory's history remains (text scrubbed); a purge removes it. The scope is
-- copied so a purge finds the history of memories already deleted.
CREATE TABLE memory_history (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    memory_id    text NOT NULL,
    user_id      text,
    agent_id     text,
    run_id       text,
    event        text NOT NULL CHECK (event IN ('ADD', 'UPDATE', 'INVALIDATE', 'DELETE', 'ARCHIVE', 'RESTORE',
                                                'CONSOLIDATE', 'EXPIRE')),
    old_memory   text,
    new_memory   text,
    actor        text NOT NULL,                         -- 'api', 'model:<model>', 'job:<name>'
    details      jsonb NOT NULL DEFAULT '{}',           -- e.g. {"superseded_by": "mem_..."}
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_history_memory ON memory_history (tenant_id, memory_id, id);
CREATE INDEX memory_history_user ON memory_history (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX memory_history_agent ON memory_history (tenant_id, agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX memory_history_run ON memory_history (tenant_id, run_id) WHERE run_id IS NOT NULL;

-- Asynchronous adds ('memjob_...'): the request waits here for the memory queue's handler; results and token
-- usage when done, last_error when failed.
CREATE TABLE memory_jobs (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    user_id       text,
    agent_id      text,
    run_id        text,
    status        text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'in_progress', 'completed', 'failed')),
    request       jsonb NOT NULL,
    results       jsonb,
    usage         jsonb,
    last_error    jsonb,
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz
);
CREATE INDEX memory_jobs_user ON memory_jobs (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX memory_jobs_agent ON memory_jobs (tenant_id, agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX memory_jobs_run ON memory_jobs (tenant_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX memory_jobs_updated ON memory_jobs (updated_at);

-- Client retries made safe (the Idempotency-Key header): the first request's answer is kept and replayed.
CREATE TABLE idempotency_keys (
    tenant_id       text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    key             text NOT NULL,
    route           text NOT NULL,                      -- 'POST /v1/memories'
    request_sha256  text NOT NULL,                      -- the same key with another body is refused
    status_code     integer NOT NULL,
    response        jsonb NOT NULL,
    user_id         text,
    agent_id        text,
    run_id          text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON memories, memory_history, memory_jobs, idempotency_keys TO engram_app;
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memories
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
ALTER TABLE memory_history ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_history
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
ALTER TABLE memory_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_jobs
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON idempotency_keys
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
