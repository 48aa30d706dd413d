"""The MigrateFunction's handler: apply Engram's SQL migrations to the deployed database.

Packaged at the root of the Lambda code package (infra/build.py copies it there); it runs inside the VPC, reads
the DSN from ``ENGRAM_DATABASE_SECRET_ARN`` like every other function, and applies the bundled
``chalicelib/store/migrations`` under migrate()'s advisory lock, so it is safe next to functions that migrate on
their own first connection.

Two ways in:
- as the ``Custom::EngramMigration`` resource's service token: CloudFormation sends Create/Update/Delete requests
  and waits for the response PUT to the presigned ``ResponseURL`` (protocol: AWS CloudFormation User Guide,
  "Custom resources", request and response objects). Create and Update migrate; Delete does nothing (the data
  outlives the stack's migration record).
- invoked by hand (``aws lambda invoke --function-name <MigrateFunctionName> out.json``): any event without
  ``RequestType`` migrates and returns ``{"applied": [versions]}``.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

PHYSICAL_RESOURCE_ID = "engram-database-migrations"
# CloudFormation caps the whole response body at 4,096 bytes; the reason is the only unbounded field.
MAX_REASON_CHARS = 1_000
RESPONSE_TIMEOUT_S = 30.0


def apply_migrations() -> list[str]:
    """Apply pending migrations to the configured database and return the versions applied now.

    Raises:
        psycopg.OperationalError: the database cannot be reached.
        botocore.exceptions.ClientError: the DSN secret cannot be read.
    """
    import psycopg

    from chalicelib.config import Settings
    from chalicelib.store.db import database_url
    from chalicelib.store.migrate import migrate

    with psycopg.connect(database_url(Settings.from_env()), autocommit=True) as conn:
        return migrate(conn)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any] | None:
    """Lambda entry point: a CloudFormation custom-resource request, or a manual invocation (see the module doc).

    Never raises for a custom-resource request: a failure is reported to CloudFormation as ``FAILED`` with the
    error as the reason (raising would leave the stack waiting for its timeout).
    """
    if "RequestType" not in event:
        return {"applied": apply_migrations()}
    status, reason, data = "SUCCESS", "", {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            data["Applied"] = ",".join(apply_migrations()) or "none"
    except Exception as exc:
        status = "FAILED"
        log_stream = getattr(context, "log_stream_name", "?")
        reason = f"{type(exc).__name__}: {exc}"[:MAX_REASON_CHARS] + f" (log stream {log_stream})"
    send_response(event, status, reason, data)
    return None


def send_response(event: dict[str, Any], status: str, reason: str, data: dict[str, str]) -> None:
    """PUT the custom-resource response (``status`` ``SUCCESS`` or ``FAILED``) to the event's ``ResponseURL``.

    Raises:
        urllib.error.URLError: the response could not be delivered (CloudFormation then times the resource out).
    """
    body = json.dumps({
        "Status": status,
        "Reason": reason or status,
        "PhysicalResourceId": event.get("PhysicalResourceId") or PHYSICAL_RESOURCE_ID,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": data,
    }).encode()
    # The presigned URL is signed for an empty Content-Type.
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_S) as response:
        response.read()
