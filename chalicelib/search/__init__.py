"""Retrieval over chunks: attribute filters, the vector leg (HNSW or exact), the keyword leg (BM25) and fusion.

The entry point is :func:`chalicelib.search.service.search` (with its ``SearchHit`` and ``RankingOptions``);
:mod:`filters` compiles OpenAI attribute filters to SQL, :mod:`vector` and :mod:`keyword` are the two legs and
:mod:`fusion` merges their rankings. Import them by name: this file imports nothing.
"""

__all__ = ["corpus", "filters", "fusion", "keyword", "ranking", "service", "vector"]
