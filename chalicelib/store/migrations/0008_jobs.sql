-- Engram schema, version 8: scheduled jobs as data (chalicelib/jobs/).
--
-- Each scheduled job (a row of chalicelib/jobs/table.py) keeps one job_state row per scope: '*' for a run over every
-- tenant, or a tenant id for a run limited to it (`engram jobs run NAME --tenant T`). The row is the job's lease
-- (two runs never overlap: a run holds leased_until), its cursor (where an unfinished pass resumes: bounded runs stop
-- before their time budget and the next run continues from here; NULL when the last pass finished) and when it is
-- next due. job_runs records every run: when it started and finished, what it counted, how it ended.
-- Both tables belong to the owner role (scheduled work runs as the owner, across tenants): engram_app has no access.

CREATE TABLE job_state (
    job            text NOT NULL,
    scope          text NOT NULL DEFAULT '*',           -- '*' = every tenant; else one tenant id
    cursor         jsonb,                               -- resume point of an unfinished pass (NULL: none open)
    due_at         timestamptz,                         -- next run may start from here (NULL: now)
    leased_until   timestamptz,                         -- a run holds the job until then (its budget + a grace)
    lease_owner    text,                                -- who holds it (host/pid/uuid), for logs
    last_run_id    bigint,
    PRIMARY KEY (job, scope)
);

CREATE TABLE job_runs (
    id            bigserial PRIMARY KEY,
    job           text NOT NULL,
    scope         text NOT NULL,
    owner         text NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    status        text NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running',         -- under way (or killed: see abandoned)
                                    'finished',        -- the pass is complete
                                    'partial',         -- stopped at its budget; the next run resumes at cursor_out
                                    'failed',          -- raised; error says why (the cursor stays where it was)
                                    'abandoned')),     -- never finished (the process died); found by the next run
    counts        jsonb NOT NULL DEFAULT '{}'::jsonb,  -- what the run did, e.g. {"failed_files": 2}
    cursor_in     jsonb,
    cursor_out    jsonb,
    error         text
);
CREATE INDEX job_runs_job ON job_runs (job, scope, id DESC);
CREATE INDEX job_runs_started ON job_runs (started_at);

REVOKE ALL ON job_state, job_runs FROM engram_app;
