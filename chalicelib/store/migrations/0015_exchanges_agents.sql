-- Engram schema, version 15: memory in the agent loop (chalicelib/responses/memory.py) — exchanges, agent
-- profiles and each tenant's memory defaults.
--
-- An exchange (seed 004, "Exchange Storage") is one completed turn of a conversation or response chain: the user's
-- prompt and the assistant's answer, kept with the memory scope of the request (user / agent / run), its thread (the
-- conversation, or the first response of a chain), its session (the run, else the thread) and what the answer was
-- given (prior_exchange_ids: the memories and exchanges recalled into it). continuation_seq counts how often the
-- thread was resumed in a new session (0 for the original). Exchanges are searched like memories: the row id `seq`,
-- the embedding of "User: …\nAssistant: …", its tsvector.

CREATE TABLE exchanges (
    seq               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                text PRIMARY KEY,                 -- 'exch_...'
    tenant_id         text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    user_id           text,
    agent_id          text,
    run_id            text,
    thread_id         text NOT NULL,                    -- 'conv_...' or the chain's first 'resp_...'
    session_id        text NOT NULL,
    response_id       text NOT NULL,                    -- the response that answered (one exchange per response)
    user_prompt       text NOT NULL,
    assistant_response text NOT NULL,
    prior_exchange_ids text[] NOT NULL DEFAULT '{}',    -- memories and exchanges recalled for the answer
    continuation_seq  integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    embedding_model   text NOT NULL,
    embedding_dim     integer NOT NULL CHECK (embedding_dim > 0),
    embedding         vector NOT NULL,
    keywords          tsvector NOT NULL,
    keyword_length    integer NOT NULL,
    CHECK (user_id IS NOT NULL OR agent_id IS NOT NULL OR run_id IS NOT NULL),
    UNIQUE (tenant_id, response_id)
);
CREATE INDEX exchanges_user ON exchanges (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX exchanges_agent ON exchanges (tenant_id, agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX exchanges_run ON exchanges (tenant_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX exchanges_thread ON exchanges (tenant_id, thread_id, seq);

-- Agent profiles ('agent_...', seed 000 "Integration with Agent Profiles"): defaults a response request names with
-- "agent" merges under itself, field by field.
CREATE TABLE agents (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name          text,
    model         text,
    instructions  text,
    tools         jsonb NOT NULL DEFAULT '[]',
    memory        jsonb,                                -- {"recall", "remember", "top_k", "score_threshold", ...}
    metadata      jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_tenant ON agents (tenant_id, id COLLATE "C");

-- A tenant's memory defaults for responses (null: memory off unless a request or agent turns it on).
ALTER TABLE tenants ADD COLUMN memory_defaults jsonb;

GRANT SELECT, INSERT, UPDATE, DELETE ON exchanges, agents TO engram_app;
ALTER TABLE exchanges ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON exchanges
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON agents
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
