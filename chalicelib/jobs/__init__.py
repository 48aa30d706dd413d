"""Scheduled work as data: every job is a row of :mod:`chalicelib.jobs.table` (name, function, cadence, lane, time
budget), every lane one scheduled Lambda function; :mod:`chalicelib.jobs.runner` runs them bounded, exclusive,
recorded and resumable. This package's face is the value types, importable without touching the database."""

from chalicelib.jobs.model import Job, JobContext, JobResult, Lane

__all__ = ["Job", "JobContext", "JobResult", "Lane"]
