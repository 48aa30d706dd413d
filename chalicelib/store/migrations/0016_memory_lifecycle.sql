-- Engram schema, version 16: the memory lifecycle (chalicelib/memory/, jobs in chalicelib/jobs/memory.py).
--
-- Episodes and instances (seed 002 §6-9) are memories too, so one search covers every tier: an episode is a
-- summary memory (memory_type 'episode', source_kind 'conversation') keeping its thread's raw messages in
-- episode_messages; after 30 days it becomes an instance (memory_type 'instance'): the raw messages are
-- compressed into archived_data and the summary stays searchable. Exchanges remember which episode took them.
-- The lifecycle audit (seed 002 §13) records every archive, restore, migration, compression, purge, expiry and
-- TTL sweep: event, entity, actor, time and counts, never the text. Tenants carry their limits (seed 000 "Data
-- Retention"), null meaning the defaults.

ALTER TABLE memories DROP CONSTRAINT memories_memory_type_check;
ALTER TABLE memories ADD CONSTRAINT memories_memory_type_check
    CHECK (memory_type IN ('fact', 'preference', 'episode', 'instance', 'procedural', 'working', 'persona',
                           'knowledge', 'entity', 'process', 'skill'));
ALTER TABLE memories ADD COLUMN episode_messages jsonb;     -- an episode's raw messages
ALTER TABLE memories ADD COLUMN archived_data bytea;        -- an instance's raw messages, zlib-compressed JSON
CREATE INDEX memories_lifecycle ON memories (tenant_id, memory_type, created_at)
    WHERE memory_type IN ('episode', 'working');
CREATE INDEX memories_last_access ON memories (tenant_id, coalesce(last_accessed_at, created_at))
    WHERE archived_at IS NULL AND NOT pinned;
-- One current persona document per user (seed 002 §10); its old versions are closed rows (superseded_by set).
CREATE UNIQUE INDEX memories_persona ON memories (tenant_id, user_id)
    WHERE memory_type = 'persona' AND superseded_by IS NULL AND valid_to IS NULL;

ALTER TABLE exchanges ADD COLUMN episode_id text;            -- the episode that took this exchange
CREATE INDEX exchanges_unepisodized ON exchanges (tenant_id, thread_id, created_at) WHERE episode_id IS NULL;

CREATE TABLE memory_audit (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    event        text NOT NULL CHECK (event IN ('archive', 'restore', 'quota_archive', 'episode_created',
                                                'instance_migration', 'compression', 'consolidation',
                                                'unconsolidation', 'purge', 'expiry', 'ttl_sweep',
                                                'persona_update')),
    entity_type  text NOT NULL CHECK (entity_type IN ('memory', 'episode', 'instance', 'scope', 'persona')),
    entity_id    text,                                  -- the memory id; null for a scope (purge)
    user_id      text,
    agent_id     text,
    run_id       text,
    actor        text NOT NULL,                         -- 'api', 'job:<name>', 'cli'
    details      jsonb NOT NULL DEFAULT '{}',           -- counts and ids, never text
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_audit_tenant ON memory_audit (tenant_id, id);
CREATE INDEX memory_audit_entity ON memory_audit (tenant_id, entity_id);

ALTER TABLE tenants ADD COLUMN limits jsonb;

GRANT SELECT, INSERT, UPDATE, DELETE ON memory_audit TO engram_app;
ALTER TABLE memory_audit ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memory_audit
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
