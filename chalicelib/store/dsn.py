"""The database URL when deployed: read once per process from Secrets Manager (``ENGRAM_DATABASE_SECRET_ARN``).

Two secret shapes are accepted: a plain ``postgresql://`` URL, or the JSON that RDS writes for managed credentials
(``{"username", "password", "host", "port", "dbname"}``, see the AWS Secrets Manager user guide, "JSON structure of
Amazon RDS database credentials secrets"). TLS is required for any host but localhost.
"""

from __future__ import annotations

import functools
import json

from psycopg.conninfo import make_conninfo

from chalicelib.errors import InvalidRequestError

# Connections to RDS Proxy / Aurora must use TLS (the proxy is created with RequireTLS).
_REMOTE_SSLMODE = "require"


def url_from_secret(secret: str) -> str:
    """A libpq connection string from a secret's ``SecretString``.

    Raises:
        InvalidRequestError: the secret is neither a URL nor RDS credentials JSON (names the missing fields).
    """
    text = secret.strip()
    if text.startswith(("postgres://", "postgresql://")):
        return text
    try:
        fields = json.loads(text)
    except ValueError:
        raise InvalidRequestError("The database secret is neither a postgresql:// URL nor JSON.",
                                  param="ENGRAM_DATABASE_SECRET_ARN") from None
    if not isinstance(fields, dict):
        raise InvalidRequestError("The database secret JSON is not an object.", param="ENGRAM_DATABASE_SECRET_ARN")
    missing = [k for k in ("username", "password", "host") if not fields.get(k)]
    if missing:
        raise InvalidRequestError(f"The database secret lacks {', '.join(missing)}.",
                                  param="ENGRAM_DATABASE_SECRET_ARN")
    host = str(fields["host"])
    return make_conninfo(
        host=host, port=str(fields.get("port") or 5432), dbname=str(fields.get("dbname") or "postgres"),
        user=str(fields["username"]), password=str(fields["password"]),
        sslmode="prefer" if host in ("localhost", "127.0.0.1") else _REMOTE_SSLMODE,
    )


@functools.cache
def url_from_secret_arn(secret_arn: str, region: str) -> str:
    """Fetch ``secret_arn`` from Secrets Manager (boto3 client created here, once per process) and return its URL.

    Raises:
        botocore.exceptions.ClientError: the secret cannot be read (missing, no permission).
        InvalidRequestError: see :func:`url_from_secret`.
    """
    import boto3

    client = boto3.client("secretsmanager", region_name=region)
    return url_from_secret(client.get_secret_value(SecretId=secret_arn)["SecretString"])
