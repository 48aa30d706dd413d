"""The serverless ingestion path: S3 drop-folder events and API attachments arrive on the ingestion queue; the
ingestion handler parses, chunks and stages a file's chunks in Postgres and fans out embedding batches (ids only)
on the embedding queue; the embedding handler embeds one batch and, for the last one, swaps the file's chunks in.
Scheduled handlers retry or fail stuck files and sweep what expired or was orphaned.

Nothing here imports torch or builds AWS clients at import time (Lambda fitness).
"""
