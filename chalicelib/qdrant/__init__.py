"""Qdrant as a transport: the port (:mod:`chalicelib.qdrant.port`, the REST API's JSON shapes), a server or
cluster over HTTP (:mod:`chalicelib.qdrant.http`) and the embedded engine (:mod:`chalicelib.qdrant.edge`), and
:func:`build_transport`, the factory. What Engram stores there and how it searches it is the Qdrant vector
backend's business (:mod:`chalicelib.search.backends.qdrant`).

Importing this package is cheap: httpx and ``qdrant_edge`` load only when a transport is built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from chalicelib.config import ENV_QDRANT_URL, ENV_VECTOR_BACKEND
from chalicelib.errors import ConfigurationError
from chalicelib.qdrant.port import (
    CHUNK_LAYOUT,
    DENSE,
    INDEXED_FIELDS,
    PARTITION_FIELD,
    PARTITION_LAYOUT,
    SPARSE,
    TENANT_FIELD,
    CollectionLayout,
    CollectionStatus,
    QdrantError,
    QdrantTransport,
    ScoredIds,
)

if TYPE_CHECKING:
    from chalicelib.config import Settings

__all__ = ["CHUNK_LAYOUT", "DENSE", "INDEXED_FIELDS", "LAMBDA_ENV", "PARTITION_FIELD", "PARTITION_LAYOUT", "SPARSE",
           "TENANT_FIELD", "CollectionLayout", "CollectionStatus", "QdrantError", "QdrantTransport", "ScoredIds",
           "build_transport", "collection_name", "embedded_root", "partition_collection_name"]

# The embedded engine's folder under the data folder.
EMBEDDED_FOLDER = "qdrant"
# Set in every AWS Lambda environment (AWS Lambda, "Defined runtime environment variables").
LAMBDA_ENV = "AWS_LAMBDA_FUNCTION_NAME"


def collection_name(settings: Settings, dimension: int) -> str:
    """The collection holding every tenant's chunks of ``dimension``-float embeddings: ``<prefix>chunks_<dim>``."""
    return f"{settings.qdrant_collection_prefix}chunks_{dimension}"


def partition_collection_name(settings: Settings, corpus: str, dimension: int) -> str:
    """The collection holding every tenant's users' ``corpus`` (``memories``, ``exchanges``) of ``dimension``-float
    embeddings: ``<prefix><corpus>_<dim>``."""
    return f"{settings.qdrant_collection_prefix}{corpus}_{dimension}"


def embedded_root(settings: Settings) -> Path:
    """Where the embedded engine keeps its shards: ``<data_dir>/qdrant``."""
    return Path(settings.data_dir) / EMBEDDED_FOLDER


def build_transport(settings: Settings) -> QdrantTransport:
    """The transport ``settings`` ask for: HTTP to ``qdrant_url`` (the API key from ``qdrant_api_key``, else the
    Secrets Manager secret ``qdrant_secret_arn``), or the embedded engine under :func:`embedded_root`.

    Raises:
        botocore.exceptions.ClientError: the API key's secret cannot be read.
        ConfigurationError: no URL inside AWS Lambda, where the embedded engine cannot run (every environment
            would keep shards of its own).
    """
    if not settings.qdrant_url and LAMBDA_ENV in os.environ:
        raise ConfigurationError(f"{ENV_VECTOR_BACKEND}=qdrant needs {ENV_QDRANT_URL} in AWS Lambda: the embedded "
                                 "engine keeps its shards on one machine's disk.")
    if settings.qdrant_url:
        from chalicelib.qdrant.http import HttpTransport

        api_key = settings.qdrant_api_key
        if api_key is None and settings.qdrant_secret_arn:
            from chalicelib import aws

            secret = aws.client("secretsmanager", settings.aws_region).get_secret_value(
                SecretId=settings.qdrant_secret_arn)
            api_key = secret["SecretString"].strip()
        return HttpTransport(settings.qdrant_url, api_key=api_key, timeout_s=settings.qdrant_timeout_s)
    from chalicelib.qdrant.edge import EdgeTransport

    return EdgeTransport(embedded_root(settings), indexing_threshold_kb=settings.qdrant_indexing_threshold_kb)
