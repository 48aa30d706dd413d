-- Engram schema, version 17: a tenant's drop folder can be turned off (issue 15 §5, the drop folder's trust model).
--
-- Whoever may write the drop bucket writes into the store a key names, in whichever tenant its first segment names
-- (infra/README.md "Drop folder trust model"). A tenant whose drop folder is off has every S3 event under its
-- prefix refused (a drop_errors row, code drop_folder_disabled) and nothing ingested, deleted or re-attributed;
-- `engram tenants drop-folder TENANT --disable` sets it. On by default, as before.

ALTER TABLE tenants ADD COLUMN drop_folder boolean NOT NULL DEFAULT true;
