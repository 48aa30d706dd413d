-- Engram schema, version 13: conversations (OpenAI's Conversations API, chalicelib/responses/conversations.py).
--
-- A conversation ('conv_...') is an ordered list of items: messages, function calls and their outputs, file search
-- calls — the shapes the Responses API uses, with the ids it gave them (or the client gave them). Items arrive in
-- turns: the items of conversations.create or of one conversations.items.create call, or the input and output
-- items of one response created with "conversation" (turn = that response's id). A response created in a
-- conversation reads the live items as its history; a long history is condensed into a summary cached here
-- (summary, covering every item up to position summary_seq).
--
-- Deleting an item keeps its row as a tombstone (item NULL, its text gone) so a pagination cursor naming it keeps
-- its place; a tombstoned id can be added again (the tombstone is then replaced). Deleting a conversation removes
-- its items; the responses that took part keep their own input and output items.

CREATE TABLE conversations (
    id           text PRIMARY KEY,                     -- 'conv_...'
    tenant_id    text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    summary      jsonb,                                -- the cached summary (chalicelib/responses/summarize.py)
    summary_seq  bigint,                               -- position of the last item the summary covers
    UNIQUE (id, tenant_id)                             -- items name both: none can join another tenant's
);
CREATE INDEX conversations_tenant ON conversations (tenant_id, id COLLATE "C");

CREATE TABLE conversation_items (
    seq              bigint GENERATED ALWAYS AS IDENTITY,  -- position: items are read in seq order
    conversation_id  text NOT NULL,
    tenant_id        text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    id               text NOT NULL,                    -- the item's id ('msg_...', 'fc_...', or the client's)
    turn             text NOT NULL,                    -- the write that added it (a response id, or 'turn_...')
    item             jsonb,                            -- the item as listed (file_search results kept); NULL: deleted
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, id),
    FOREIGN KEY (conversation_id, tenant_id) REFERENCES conversations (id, tenant_id) ON DELETE CASCADE
);
CREATE INDEX conversation_items_order ON conversation_items (conversation_id, seq);

GRANT SELECT, INSERT, UPDATE, DELETE ON conversations, conversation_items TO engram_app;
ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON conversations
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
ALTER TABLE conversation_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON conversation_items
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
