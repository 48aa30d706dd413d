-- Engram schema, version 6: the serverless ingestion pipeline (S3 drop folder → SQS → ingestion → embedding
-- batches). See chalicelib/events/ for the handlers and chalicelib/store/{ingest_jobs,staged_chunks,drop_objects,
-- drop_errors}.py for the statements.
--
-- A file attachment is processed in "versions": each claim of a vector_store_files row bumps its attempts, and that
-- number names the run (ingest_jobs.version). The ingestion handler stages a version's chunk texts here (SQS
-- messages carry ids only: SQS caps a message at 256 KB), embedding handlers fill in the vectors one batch at a
-- time, and the handler that lands the last batch swaps the staged chunks in for the live ones in one transaction.

-- File bytes kept in S3 (deployed): content is NULL and content_bucket/content_key say where the bytes are.
-- API uploads live under 'files/<tenant>/<file_id>'; a drop-folder file's bytes are its own object.
ALTER TABLE files
    ADD COLUMN content_bucket  text,
    ADD COLUMN content_key     text;
CREATE INDEX files_content_key ON files (content_key) WHERE content_key IS NOT NULL;

-- One processing run (version) of one attached file.
CREATE TABLE ingest_jobs (
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id  text NOT NULL,                    -- no FK: deleting a store must not wait on a job's row lock
    file_id          text NOT NULL,
    version          integer NOT NULL,                 -- vector_store_files.attempts claimed for this run
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending',      -- claimed, chunks not staged yet
                                       'embedding',    -- staged; batch_count batches outstanding
                                       'completed',    -- swapped in
                                       'failed',       -- gave up after the last receive (a redriven message re-opens it)
                                       'rejected',     -- the document cannot be ingested (permanent)
                                       'superseded')), -- a newer version, a cancel or a detach took over
    source_bucket    text,                             -- drop folder: the object this version ingests ...
    source_key       text,
    source_etag      text,                             -- ... at this ETag (GetObject If-Match)
    content_sha256   text,                             -- hex digest of the bytes staged
    chunk_count      integer NOT NULL DEFAULT 0,
    batch_count      integer NOT NULL DEFAULT 0,
    batches_done     integer NOT NULL DEFAULT 0,
    last_error       jsonb,                            -- {"code", "message"} when failed/rejected
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    staged_at        timestamptz,
    PRIMARY KEY (vector_store_id, file_id, version),
    CHECK (batches_done BETWEEN 0 AND batch_count)
);
CREATE INDEX ingest_jobs_tenant ON ingest_jobs (tenant_id);
CREATE INDEX ingest_jobs_updated ON ingest_jobs (updated_at);

-- Embedding batches that have landed (the idempotency key of an embedding message).
CREATE TABLE ingest_job_batches (
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id  text NOT NULL,
    file_id          text NOT NULL,
    version          integer NOT NULL,
    batch_no         integer NOT NULL CHECK (batch_no >= 0),
    done_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (vector_store_id, file_id, version, batch_no),
    FOREIGN KEY (vector_store_id, file_id, version) REFERENCES ingest_jobs ON DELETE CASCADE
);

-- Chunk texts of a version waiting for (or holding) their vectors; moved into chunks when the version completes.
CREATE TABLE staged_chunks (
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    vector_store_id  text NOT NULL,
    file_id          text NOT NULL,
    version          integer NOT NULL,
    chunk_index      integer NOT NULL,
    batch_no         integer NOT NULL,                 -- chunk_index / embed_batch_chunks
    text             text NOT NULL,
    token_count      integer NOT NULL,
    char_start       integer NOT NULL,
    char_end         integer NOT NULL,
    page_start       integer,
    page_end         integer,
    embedding        vector,                           -- NULL until its batch lands
    PRIMARY KEY (vector_store_id, file_id, version, chunk_index),
    FOREIGN KEY (vector_store_id, file_id, version) REFERENCES ingest_jobs ON DELETE CASCADE
);
CREATE INDEX staged_chunks_batch ON staged_chunks (vector_store_id, file_id, version, batch_no);

-- What the drop folder last saw of each object (S3 events may be duplicated or arrive out of order): the newest
-- event's sequencer/ETag, and the file it became. A sidecar '<file>.metadata.json' has a row of its own whose
-- attributes hold its parsed metadataAttributes.
CREATE TABLE drop_objects (
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    bucket           text NOT NULL,
    key              text NOT NULL,                    -- decoded object key '<tenant>/<store>/<path>'
    vector_store_id  text,
    file_id          text,
    version          integer,                          -- ingest_jobs.version started for the newest event
    etag             text,
    sequencer        text,                             -- S3's hex sequencer of the newest event (NULL: moto)
    event_time       timestamptz,
    deleted          boolean NOT NULL DEFAULT false,
    attributes       jsonb,                            -- sidecars: the attributes they set
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bucket, key)
);
CREATE INDEX drop_objects_tenant ON drop_objects (tenant_id);

-- Drop-folder events that could not be applied (unknown tenant, bad store, bad key or sidecar, gave up): never a
-- silent drop. tenant_id is what the key names, which may be no tenant at all (hence no foreign key).
CREATE TABLE drop_errors (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        text,
    bucket           text NOT NULL,
    key              text NOT NULL,
    event            text NOT NULL,                    -- '<eventName>|<sequencer or eventTime>|<etag>': one row per event
    code             text NOT NULL,
    message          text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (bucket, key, event, code)
);
CREATE INDEX drop_errors_tenant_created ON drop_errors (tenant_id, created_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON ingest_jobs, ingest_job_batches, staged_chunks, drop_objects, drop_errors
    TO engram_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO engram_app;

ALTER TABLE ingest_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ingest_jobs
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE ingest_job_batches ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ingest_job_batches
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE staged_chunks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON staged_chunks
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE drop_objects ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON drop_objects
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE drop_errors ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON drop_errors
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
