-- Engram schema, version 22: the drop folder is synced with its bucket (issue 24 §1, chalicelib/events/sync.py).
--
-- A sync walks one tenant's prefix in S3's listing order (UTF-8 bytes) and reads the drop_objects rows of each
-- listed page's key range next to it; this index serves those ranges (COLLATE "C" compares bytes).
CREATE INDEX drop_objects_tenant_key ON drop_objects (tenant_id, bucket, key COLLATE "C");
