"""Engram: an OpenAI-compatible knowledge and memory service (domain code packaged for Lambda by Chalice)."""
