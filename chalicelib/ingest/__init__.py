"""Ingestion: bytes → text (parse) → chunks (chunk) → vectors (embed) → rows (store); see ``pipeline``."""
