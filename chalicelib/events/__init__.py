"""The serverless ingestion path: S3 drop-folder events and API attachments arrive on the ingestion queue; the
ingestion handler parses, chunks and stages a file's chunks in Postgres and fans out embedding batches (ids only)
on the embedding queue; the embedding handler embeds one batch and, for the last one, swaps the file's chunks in.
Scheduled handlers retry or fail stuck files and sweep what expired or was orphaned.

Public modules (``__all__``; import them by name): :mod:`consumer` (the SQS consumer every queue's Lambda runs),
:mod:`batch` (partial batch responses), :mod:`notifications` (S3 event notifications → records), :mod:`drop` (a
drop-folder event applied), :mod:`s3_keys` (drop-folder key layout), :mod:`sidecar` (``*.metadata.json``
attributes), :mod:`orphans` (the orphaned-object sweep), :mod:`sync` (the drop folder synced with its bucket) and
:mod:`synced` (what a sync hands to the ingestion path).

Nothing here imports torch or builds AWS clients at import time (Lambda fitness); this file imports nothing.
"""

__all__ = ["batch", "consumer", "drop", "notifications", "orphans", "s3_keys", "sidecar", "sync", "synced"]
