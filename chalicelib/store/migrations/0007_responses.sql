-- Engram schema, version 7: stored Responses (OpenAI's Responses API, chalicelib/responses/).
--
-- One row per stored response (store=true; store=false responses are never written). The Response object is kept
-- as returned, with file_search results always present (they are removed on read unless the caller includes
-- them); input_items are the request's input items with their ids. A conversation is the chain of
-- previous_response_id links; there is no foreign key, so deleting a response leaves its children readable (a
-- chain walk stops at the gap). summary caches the conversation summary computed for this response (lazily
-- when a request chains onto a long history, or eagerly by the scheduled pass): see
-- chalicelib/responses/summarize.py for its shape.

CREATE TABLE responses (
    id                    text PRIMARY KEY,             -- 'resp_...'
    tenant_id             text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    previous_response_id  text,                         -- the parent in the conversation, if any
    created_at            timestamptz NOT NULL DEFAULT now(),
    status                text NOT NULL
                          CHECK (status IN ('completed', 'failed', 'incomplete', 'cancelled', 'in_progress')),
    response              jsonb NOT NULL,               -- the Response object (file_search results included)
    input_items           jsonb NOT NULL,               -- the request's input items, ids assigned
    turn_tokens           integer NOT NULL CHECK (turn_tokens >= 0),  -- estimated tokens of input + output items
    history_tokens        integer NOT NULL CHECK (history_tokens >= 0),  -- estimated tokens a request chaining onto
                                                        -- this response carries as history (summary + verbatim turns)
    summary               jsonb                         -- the cached conversation summary, if one was computed
);
CREATE INDEX responses_tenant_previous ON responses (tenant_id, previous_response_id);
-- Long conversations without a summary: what the eager summarization pass scans.
CREATE INDEX responses_unsummarized ON responses (history_tokens) WHERE summary IS NULL;

GRANT SELECT, INSERT, UPDATE, DELETE ON responses TO engram_app;

ALTER TABLE responses ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON responses
    USING (tenant_id = engram_current_tenant()) WITH CHECK (tenant_id = engram_current_tenant());
