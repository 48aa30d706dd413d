-- Engram schema, version 31: GET /v1/responses (issue 34, the console's list of stored responses) pages a tenant's
-- responses by id, byte-wise (ids are time-ordered: chalicelib/ids.py), newest first by default. This index serves
-- that order for one tenant, so a page costs its rows, not the tenant's whole history.
CREATE INDEX responses_tenant_order ON responses (tenant_id, id COLLATE "C");
