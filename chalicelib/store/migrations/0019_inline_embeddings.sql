-- Engram schema, version 19: embeddings kept in the row (storage MAIN) instead of out of line (EXTERNAL,
-- pgvector's default for its types), and chunks kept whole in their rows up to ~8 kB.
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
-- MAIN alone has a cost: the text and the tsvector are then compressed or moved out first, and BM25's exact scoring
-- reads the tsvector (8.2 against 7.5 ms over the same 1,000 rows). So chunks also get toast_tuple_target 8160
-- (the most Postgres allows): a row is left alone up to ~8 kB, and a chunk of ordinary size (≤ ~400 tokens at 384
-- dimensions) keeps text, tsvector and vector in the row. The same 1,000 rows: exact vector scan 0.63 ms, BM25 7.0
-- ms. benchmarks/search.py at 100k, every row rewritten so, against the rows before this migration: hybrid 2 words
-- 14.6 / 30.3 ms p50 / p95 (14.8 / 29.2 before), the 1 % store's vector leg 1.5 ms (2.6), the 1 %-filtered one 1.7
-- ms (2.8); the heap is 410 MB instead of 152 MB plus 206 MB of TOAST.
--
-- The settings apply to values written from now on. Rows already stored keep their out-of-line vectors until
-- rewritten (a file's chunks are rewritten when it is re-ingested); nothing is rewritten here, as a migration
-- that rewrote every chunk would hold the table for as long as a bulk load.

ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE chunks SET (toast_tuple_target = 8160);
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE exchanges ALTER COLUMN embedding SET STORAGE MAIN;
