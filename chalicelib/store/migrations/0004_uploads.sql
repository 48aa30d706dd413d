-- Engram schema, version 4: Uploads (OpenAI's Uploads API), so a file larger than one request can arrive in
-- parts. The parts' bytes live in blob storage (S3, or files under the data folder) under
-- '<tenant>/uploads/<upload_id>/<part_id>'; these tables hold what is known about them. Completing an upload
-- concatenates the named parts into an ordinary file (files row) and deletes the parts' blobs.

CREATE TABLE uploads (
    id                   text PRIMARY KEY,             -- 'upload_...'
    tenant_id            text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    filename             text NOT NULL,
    purpose              text NOT NULL,
    bytes                bigint NOT NULL CHECK (bytes >= 0),  -- the size the client declared, bytes
    mime_type            text NOT NULL,
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'completed', 'cancelled')),  -- 'expired' is derived
    file_expires_after_s integer,                      -- expires_after.seconds for the file made at completion
    created_at           timestamptz NOT NULL DEFAULT now(),
    expires_at           timestamptz NOT NULL,         -- a pending upload past this is expired
    completed_at         timestamptz,
    cancelled_at         timestamptz,
    file_id              text REFERENCES files(id) ON DELETE SET NULL  -- the file made at completion
);
CREATE INDEX uploads_tenant_created ON uploads (tenant_id, created_at, id);
CREATE INDEX uploads_pending_expires_at ON uploads (expires_at) WHERE status = 'pending';

CREATE TABLE upload_parts (
    id          text PRIMARY KEY,                      -- 'part_...'
    upload_id   text NOT NULL REFERENCES uploads(id) ON DELETE CASCADE,
    tenant_id   text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    bytes       bigint NOT NULL CHECK (bytes >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    blob_key    text NOT NULL                          -- '<tenant>/uploads/<upload_id>/<part_id>'
);
CREATE INDEX upload_parts_upload ON upload_parts (upload_id, created_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON uploads, upload_parts TO engram_app;

ALTER TABLE uploads ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON uploads
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());

ALTER TABLE upload_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON upload_parts
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
