-- Version 24: a Qdrant store's file is searchable the moment it shows `completed`.
--
-- The transaction that swaps a file's chunks in (and marks it completed) now also upserts their points into Qdrant
-- before it commits, holding the file's sync lock, and records here the seq it wrote (written_seq). The sync that
-- follows the commit finds written_seq = seq (nothing changed since) and only deletes the older version's points;
-- any later change moves seq on (engram_queue_index_sync), so the next sync writes everything again. A rollback
-- takes the record back with the chunks: the points it left match no chunk and are never returned.

ALTER TABLE vector_index_outbox ADD COLUMN written_seq bigint;
