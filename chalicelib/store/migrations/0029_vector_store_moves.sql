-- Engram schema, version 29: a store's move between vector backends that any process can watch (issue 33 §3).
--
-- `engram stores reindex` runs the move where the backends' engines can be held: in the CLI's own process, or —
-- while `engram serve` holds the embedded Qdrant engine — in the stack, which the CLI asks through its queue and
-- then watches here. The row already said how far a move got (files_done, cursor_file_id); it now also says how
-- far it has to go and why it stopped, so the watcher can show progress and a failure from another process.

ALTER TABLE vector_store_reindex ADD COLUMN total_files integer;
ALTER TABLE vector_store_reindex ADD COLUMN last_error text;
