-- Engram schema, version 21: the memory service (chalicelib/memory/service.py).
--
-- A memory says which prompt made it: prompt_version holds the tags (name@version, space-separated, in call order)
-- of the chat prompts whose answers produced its text (chalicelib/chat/prompts.py) — an inferring add's
-- 'memory.extraction@1 memory.decision@1', a merge's 'memory.merge@1' — and stays null for text stored as written.
-- A memory's history records feedback on it (mem0's feedback: POSITIVE, NEGATIVE, VERY_NEGATIVE and a reason, in
-- details), so what users said about a memory is read where its changes are.

ALTER TABLE memories ADD COLUMN prompt_version text;

ALTER TABLE memory_history DROP CONSTRAINT memory_history_event_check;
ALTER TABLE memory_history ADD CONSTRAINT memory_history_event_check
    CHECK (event IN ('ADD', 'UPDATE', 'INVALIDATE', 'DELETE', 'ARCHIVE', 'RESTORE', 'CONSOLIDATE', 'EXPIRE',
                     'FEEDBACK'));
