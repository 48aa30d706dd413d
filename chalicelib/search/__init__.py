"""Retrieval over chunks: attribute filters, the vector leg (HNSW or exact), the keyword leg (BM25) and fusion."""
