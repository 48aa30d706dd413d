"""The database URL when deployed: read once per process from Secrets Manager (``ENGRAM_DATABASE_SECRET_ARN``).

Two secret shapes are accepted: a plain ``postgresql://`` URL, or the JSON that RDS writes for managed credentials
(``{"username", "password", "host", "port", "dbname"}``, see the AWS Secrets Manager user guide, "JSON structure of
Amazon RDS database credentials secrets"). TLS is required for any host but localhost.
"""

from __future__ import annotations

import functools
import json

from psycopg.conninfo import make_conninfo

from chalicelib.errors import ConfigurationError

# The setting that names the secret (chalicelib.config.ENV_DATABASE_SECRET_ARN).
SECRET_SETTING = "ENGRAM_DATABASE_SECRET_ARN"

# Connections to RDS Proxy / Aurora must use TLS (the proxy is created with RequireTLS).
_REMOTE_SSLMODE = "require"


def url_from_secret(secret: str) -> str:
    """A libpq connection string from a secret's ``SecretString``.

    Raises:
        ConfigurationError: the secret is neither a URL nor RDS credentials JSON (names the missing fields).
    """
    text = secret.strip()
    if text.startswith(("postgres://", "postgresql://")):
        return text
    try:
        fields = json.loads(text)
    except ValueError:
        raise ConfigurationError("The database secret is neither a postgresql:// URL nor JSON.",
                                 setting=SECRET_SETTING) from None
    if not isinstance(fields, dict):
        raise ConfigurationError("The database secret JSON is not an object.", setting=SECRET_SETTING)
    missing = [k for k in ("username", "password", "host") if not fields.get(k)]
    if missing:
        raise ConfigurationError(f"The database secret lacks {', '.join(missing)}.", setting=SECRET_SETTING)
    host = str(fields["host"])
    return make_conninfo(
        host=host, port=str(fields.get("port") or 5432), dbname=str(fields.get("dbname") or "postgres"),
        user=str(fields["username"]), password=str(fields["password"]),
        sslmode="prefer" if host in ("localhost", "127.0.0.1") else _REMOTE_SSLMODE,
    )


@functools.cache
def url_from_secret_arn(secret_arn: str, region: str) -> str:
    """Fetch ``secret_arn`` from Secrets Manager (once per process) and return its URL.

    Raises:
        botocore.exceptions.ClientError: the secret cannot be read (missing, no permission).
        ConfigurationError: see :func:`url_from_secret`.
    """
    from chalicelib import aws

    return url_from_secret(aws.client("secretsmanager", region).get_secret_value(SecretId=secret_arn)["SecretString"])
