-- Engram schema, version 19: embeddings kept in the row (storage MAIN) instead of out of line (EXTERNAL,
-- pgvector's default for its types).
--
-- A 384-dimension vector is 1,540 bytes: with a chunk's text and tsvector, the row passes Postgres' 2 kB TOAST
-- threshold, and an EXTERNAL vector is then always moved to the TOAST table, so every exact distance (the exact
-- scan of a small scope, the exact distances of the HNSW path's rows, the other leg's evidence) fetches it through
-- the TOAST index: one extra index lookup and heap page per row. With MAIN, Postgres compresses and moves the text
-- and the tsvector out first and keeps the vector in the row when the row then fits (it does at 384 and 768
-- dimensions; larger vectors still go out of line). benchmarks/search.py's 100k data set, the 1 % store's 1,000
-- rows copied twice and scanned exactly, 50 query vectors each: 1.67 ms p50 out of line, 0.57 ms in the row; the
-- heap grows by a quarter and the TOAST table shrinks by more.
--
-- The setting applies to values written from now on. Rows already stored keep their out-of-line vectors until
-- rewritten (a file's chunks are rewritten when it is re-ingested); nothing is rewritten here, as a migration
-- that rewrote every chunk would hold the table for as long as a bulk load.

ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE exchanges ALTER COLUMN embedding SET STORAGE MAIN;
