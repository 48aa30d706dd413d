"""Postgres + pgvector storage: connections, migrations and one repository module per table group.

Every function takes the caller's ``tenant_id`` and every statement filters on it.
"""
