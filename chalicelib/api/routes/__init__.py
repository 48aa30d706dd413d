"""Chalice blueprints of the OpenAI-compatible API, one per resource; ``app.py`` mounts them under ``/v1``.
(:mod:`common` holds what the routes share.)"""

__all__ = ["agents", "conversations", "drop_folder", "file_batches", "files", "mcp", "mem0", "memories", "responses",
           "uploads", "vector_store_files", "vector_stores"]
