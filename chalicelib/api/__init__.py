"""HTTP edge: Chalice blueprints under ``/v1`` and the one place errors become OpenAI's envelope."""
