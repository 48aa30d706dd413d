"""Chalice blueprints of the OpenAI-compatible API, one per resource; ``app.py`` mounts them under ``/v1`` (mem0's
under its own prefix, ``mcp`` and ``console`` at the root). (:mod:`common` holds what the routes share.)"""

__all__ = ["agents", "console", "conversations", "drop_folder", "file_batches", "files", "mcp", "mem0", "memories",
           "operations", "responses", "uploads", "vector_store_files", "vector_stores"]
