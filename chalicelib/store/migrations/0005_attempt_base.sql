-- Engram schema, version 5: attempt numbers never go back.
--
-- A processing claim's attempt number guards the worker's final write (chalicelib/store/processing.py). Resetting
-- attempts to 0 when a file is re-attached let a worker still busy with the previous attachment match a new claim's
-- number and write stale chunks. Now re-attaching keeps attempts and records where this attachment's attempts
-- start; the retry limit counts attempts - attempt_base.
ALTER TABLE vector_store_files ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;
