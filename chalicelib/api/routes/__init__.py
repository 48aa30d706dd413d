"""Chalice blueprints of the OpenAI-compatible API, one per resource; ``app.py`` mounts them under ``/v1``."""
