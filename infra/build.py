"""Build Engram's AWS deployment: the dependency layers, the code package and the CloudFormation (SAM) template.

    python -m infra.build layer     # requirements.txt for Lambda → build/aws/{dependencies,mcp,parsers}-layer.zip
    python -m infra.build package   # code package + template → build/aws/{deployment.zip,template.json} (offline)
        [--drop-tenants acme,beta]  # + one IAM managed policy per tenant: write <tenant>/* in the drop bucket only
    python -m infra.build all       # both

``package`` runs ``chalice package --merge-template infra/template.yaml`` on a *staging copy* of the project
whose requirements.txt is empty: Chalice then zips only our code (app.py, chalicelib/, its own runtime, and
infra/functions/ through Chalice's vendor/ folder) and never calls pip, so it works offline and in seconds (the
template tests run exactly this). The dependencies ship in two Lambda layers that ``layer`` builds with
``pip install --platform manylinux2014_x86_64 --only-binary=:all:`` (minus the AWS SDK, which the runtime
provides, and test suites / headers / Cython sources / parts of packages Engram never imports, with debug symbols
stripped from extension modules):

- ``dependencies-layer.zip`` (:data:`LAYERS` ``dependencies``): requirements.txt without the document parsers'
  requirements (:data:`PARSER_REQUIREMENTS`); every function has it;
- ``parsers-layer.zip`` (``parsers``): what the parsers add (pypdf, pdfminer.six and its cryptography, python-docx,
  lxml, ...); only the functions that parse documents have it (a queue whose ``QueueSpec.parses`` is set: the
  ingest consumer). The API never parses when deployed (``ENGRAM_INLINE_INGEST=false``: attach requests go through
  the ingest queue), so it stays under the 50 MB per function of issue 16.

Both layers come from one resolution (the parsers layer is the full install minus the dependencies layer's
entries; a version that differs between the two resolutions fails the build), so a package shared by both (e.g.
typing-extensions) ships once, in the dependencies layer. Trade-off: the layers are resolved by pip's platform
tags instead of Chalice's dependency builder, so a dependency without a manylinux2014 wheel fails the layer build
instead of being compiled from source (none does today); in exchange the code package stays small and deploys
fast, and the layers are rebuilt only when requirements.txt changes.

A third layer, ``mcp-layer.zip`` (``mcp``: the official MCP SDK, :data:`MCP_REQUIREMENTS`, and what only it pulls
in: starlette, sse-starlette, uvicorn, jsonschema, opentelemetry-api, pyjwt and cryptography — the SDK's server
seals its multi-round-trip state with AES-GCM), goes to the functions that serve ``/mcp`` or run the Responses API's
``mcp`` tool: the API and the streaming front. It comes from its own resolution over the dependencies layer (the same
check: it must not change a version the dependencies layer holds), so cryptography ships in both the MCP and the
parsers' layer and no function has both (each stays under 50 MB; the ingest function keeps its size).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

PROJECT = Path(__file__).resolve().parents[1]
MERGE_TEMPLATE = PROJECT / "infra" / "template.yaml"
FUNCTIONS_DIR = PROJECT / "infra" / "functions"  # copied to the package root (Chalice's vendor/ folder)
MIGRATIONS_DIR = PROJECT / "chalicelib" / "store" / "migrations"
DEFAULT_OUT = PROJECT / "build" / "aws"
CHALICE_STAGE = "prod"
TEMPLATE_NAME = "template.json"
CODE_ZIP = "deployment.zip"  # the name Chalice gives the code package; template.yaml refers to it
LAYER_ZIP = "dependencies-layer.zip"  # every function (template.yaml's DependenciesLayer)
PARSERS_LAYER_ZIP = "parsers-layer.zip"  # the functions that parse documents (ParsersLayer)
PARSERS_LAYER = "ParsersLayer"
# The document parsers' requirements (chalicelib/ingest/parse/): only the parsing functions ship them and what they
# pull in (cryptography for pdfminer.six, lxml, ...; ~40 MB of the ~65 MB all requirements take).
MCP_LAYER_ZIP = "mcp-layer.zip"  # the functions that serve /mcp or call MCP servers (McpLayer): API, StreamingFront
MCP_LAYER = "McpLayer"
# The MCP SDK: only the functions with the MCP layer ship it and what it pulls in (~18 MB with cryptography).
MCP_REQUIREMENTS = ("mcp",)
MCP_FUNCTIONS = ("APIHandler", "StreamingFront")
LAYER_ZIPS = {"DependenciesLayer": LAYER_ZIP, PARSERS_LAYER: PARSERS_LAYER_ZIP,
              MCP_LAYER: MCP_LAYER_ZIP}  # template logical id → zip
PARSER_REQUIREMENTS = ("pypdf", "pdfminer-six", "charset-normalizer", "python-docx", "python-bidi",
                       "beautifulsoup4", "lxml")
# Lambda's Python 3.11 runtime: Amazon Linux 2 (glibc 2.26), x86_64 — manylinux2014 (glibc 2.17) wheels run there.
LAMBDA_PLATFORM = "manylinux2014_x86_64"
LAMBDA_PYTHON = "3.11"
# Chalice packages its own runtime (chalice/app.py) with the code; its CLI dependencies are not needed at runtime.
LAYER_EXCLUDED_REQUIREMENTS = ("chalice",)
# Lambda's Python runtime ships the AWS SDK (boto3 and its dependencies, importable from /var/runtime): leaving them
# out saves ~23 MB unzipped. Trade-off: the SDK version is the runtime's (AWS updates it; >= requirements.txt's
# boto3>=1.34 on python3.11), not the one pip would resolve.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six", "urllib3")
# Never imported at runtime: test suites, type stubs, C headers and Cython sources (~9 MB, mostly numpy's tests).
PRUNED_DIRS = ("tests",)
PRUNED_SUFFIXES = (".pyi", ".pxd", ".pyx", ".pxi", ".h", ".c", ".cpp")
# Parts of dependencies Engram never imports, relative to the layer's python/ folder (globs), ~5.5 MB unzipped.
# tests/infra/test_layers.py imports every chalicelib module and parses every supported format from the built
# layers alone, so a part removed here that something does import fails there, not in Lambda.
UNUSED_PARTS = (
    "lxml/objectify.*",  # lxml.objectify: python-docx and BeautifulSoup use lxml.etree only
    "lxml/html",  # lxml.html (diff, clean, formfill): BeautifulSoup's lxml builder uses lxml.etree
    "lxml/isoschematron",
    "lxml/includes",  # C headers and Cython declarations
    "aws_lambda_powertools/event_handler/openapi/swagger_ui",  # Swagger UI's JavaScript and CSS
    "aws_lambda_powertools/utilities/idempotency",  # powertools utilities Engram does not use
    "aws_lambda_powertools/utilities/parameters",
    "aws_lambda_powertools/utilities/feature_flags",
    "aws_lambda_powertools/utilities/data_masking",
    "aws_lambda_powertools/utilities/streaming",
    "aws_lambda_powertools/utilities/circuit_breaker",
    "aws_lambda_powertools/utilities/auth_alpha",
    "docx/templates/default-docx-template",  # python-docx's template for new documents; Engram only reads
    "docx/templates/default.docx",
)
CHALICE_TIMEOUT_S = 300
# Every function in the VPC needs the ENI actions, which support no resource scoping.
ENI_POLICY = "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaENIManagementAccess"
MODEL_ARN = "arn:${{AWS::Partition}}:bedrock:${{AWS::Region}}::foundation-model/${{{parameter}}}"
# AWS: a Lambda event source queue's visibility timeout should be at least six times the function's timeout
# ("Configuring an Amazon SQS queue to use with Lambda", Lambda developer guide).
VISIBILITY_PER_TIMEOUT = 6
DLQ_RETENTION_S = 14 * 24 * 3600  # the SQS maximum: time to fix the cause and `engram redrive`


def stage(dest: Path) -> Path:
    """Copy what Lambda runs into ``dest`` (created; must not exist) and return it.

    ``dest`` gets app.py, chalicelib/, .chalice/config.json, an empty requirements.txt and
    vendor/ = infra/functions/. Bytecode caches are left out.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir(parents=True)
    shutil.copy2(PROJECT / "app.py", dest / "app.py")
    shutil.copytree(PROJECT / "chalicelib", dest / "chalicelib", ignore=ignore)
    (dest / ".chalice").mkdir()
    shutil.copy2(PROJECT / ".chalice" / "config.json", dest / ".chalice" / "config.json")
    (dest / "requirements.txt").write_text("# dependencies ship in the layer built by `python -m infra.build layer`\n")
    shutil.copytree(FUNCTIONS_DIR, dest / "vendor", ignore=ignore)
    return dest


def migration_versions() -> list[str]:
    """The bundled migration versions (file names without ``.sql``), sorted: the migration resource's input."""
    return sorted(p.name.removesuffix(".sql") for p in MIGRATIONS_DIR.glob("*.sql"))


def synthesize(out: Path, *, work: Path | None = None, drop_tenants: tuple[str, ...] = ()) -> Path:
    """Package the code and write the template into ``out``; return the template's path.

    Runs ``chalice package`` (subprocess, no network) on a staging copy under ``work`` (a temporary folder by
    default), converts the merged template to JSON (no YAML aliases for CloudFormation's parser), fills in
    the migration resource's ``Migrations`` and adds one drop-writer policy per tenant of ``drop_tenants``
    (:func:`drop_writer_resources`).

    Raises:
        subprocess.CalledProcessError: Chalice failed (its output is in the exception).
        ValueError: a tenant name that cannot be a drop-folder prefix.
    """
    writers = drop_writer_resources(drop_tenants)  # checked before the slow part
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        staging = stage(Path(tmp) / "project")
        packaged = Path(tmp) / "packaged"
        env = {**os.environ, "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"}
        subprocess.run(
            [sys.executable, "-c", "import sys; from chalice.cli import main; sys.exit(main())",
             "package", "--stage", CHALICE_STAGE, "--merge-template", str(MERGE_TEMPLATE), str(packaged)],
            cwd=staging, env=env, check=True, capture_output=True, text=True, timeout=CHALICE_TIMEOUT_S,
        )
        template = yaml.safe_load((packaged / "sam.yaml").read_text())
        shutil.copy2(packaged / CODE_ZIP, out / CODE_ZIP)
    add_bytecode(out / CODE_ZIP)
    template["Resources"]["DatabaseMigration"]["Properties"]["Migrations"] = migration_versions()
    add_generated(template)
    for logical_id, resource in writers.items():
        template["Resources"][logical_id] = resource
        template.setdefault("Outputs", {})[f"{logical_id}Arn"] = {
            "Description": resource["Properties"]["Description"], "Value": {"Ref": logical_id}}
    path = out / TEMPLATE_NAME
    path.write_text(json.dumps(template, indent=1) + "\n")
    return path


# A tenant prefix: one key segment that no policy wildcard or CloudFormation substitution can widen.
_TENANT_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@=+-]{0,127}$")
# Writing a drop-folder object: put (single or multipart), delete, abort a multipart upload and list its parts.
DROP_WRITER_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


def drop_writer_resources(tenants: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """One IAM managed policy per tenant that lets whoever it is attached to (a user, a group, a role of the
    tenant's own pipeline) write the drop folder of that tenant only: objects under ``<tenant>/`` of the drop bucket,
    list that prefix, and nothing under ``<tenant>/uploads/upload_*`` (the API's upload parts). Without them,
    whoever may write the bucket writes into every tenant's stores (the key's first segment names the tenant).
    ``{logical id: resource}``; the logical id is ``DropWriter<Tenant letters><hash>Policy``.

    Raises:
        ValueError: a tenant that is not one key segment of letters, digits and ``._@=+-`` (at most 128), the
            prefix of the API's own file bytes (``files``), or named twice.
    """
    from chalicelib.store.files import CONTENT_PREFIX

    out: dict[str, dict[str, Any]] = {}
    for tenant in tenants:
        if not _TENANT_PREFIX.match(tenant) or tenant == CONTENT_PREFIX.rstrip("/"):
            raise ValueError(f"{tenant!r} cannot be a drop-folder tenant prefix")
        letters = "".join(c for c in tenant.title() if c.isalnum())[:40]
        logical_id = f"DropWriter{letters}{hashlib.sha256(tenant.encode()).hexdigest()[:8]}Policy"
        if logical_id in out:
            raise ValueError(f"tenant {tenant!r} is named twice")
        objects = {"Fn::Sub": "${DropBucket.Arn}/" + tenant + "/*"}
        out[logical_id] = {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
            "Description": f"Write the Engram drop folder of tenant {tenant} only ({tenant}/* in the drop bucket)",
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [
                {"Sid": "WriteTenantPrefix", "Effect": "Allow", "Action": list(DROP_WRITER_ACTIONS),
                 "Resource": objects},
                {"Sid": "ListTenantPrefix", "Effect": "Allow", "Action": "s3:ListBucket",
                 "Resource": {"Fn::GetAtt": ["DropBucket", "Arn"]},
                 "Condition": {"StringLike": {"s3:prefix": [f"{tenant}/*"]}}},
                {"Sid": "NotUploadParts", "Effect": "Deny", "Action": list(DROP_WRITER_ACTIONS),
                 "Resource": {"Fn::Sub": "${DropBucket.Arn}/" + tenant + "/uploads/upload_*"}},
            ]}}}
    return out


def lane_resources() -> dict[str, dict[str, Any]]:
    """What each lane of the jobs table (:data:`chalicelib.jobs.table.LANES`) needs beyond the function Chalice
    generates for its schedule: the function's role and log group (:func:`function_resources`).
    ``{logical id: resource}``; the function entries hold only the properties merged into Chalice's."""
    from chalicelib.jobs.table import LANES

    out: dict[str, dict[str, Any]] = {}
    for lane in LANES:
        out.update(function_resources(lane.name, lane.needs))
    return out


def queue_resources() -> dict[str, dict[str, Any]]:
    """Every queue of the message table (:data:`chalicelib.dispatch.table.QUEUES`) and what its consumer needs
    beyond the function Chalice generates for it: the queue (``<stack>-<role>``, SSE-SQS, visibility timeout six
    times the consumer's timeout, redrive to its dead-letter queue after ``MaxReceiveCount`` receives), the
    dead-letter queue (``<stack>-<role>-dlq``, 14 days' retention), and the consumer's event source (its queue,
    ``ReportBatchItemFailures``, ``MaximumConcurrency``), role and log group (:func:`function_resources`, plus
    consuming its queue), and the parsers' layer when it ``parses``. ``{logical id: resource}``; the function
    entries hold only what is merged into Chalice's."""
    from chalice.utils import to_cfn_resource_name

    from chalicelib.dispatch.table import QUEUES

    out: dict[str, dict[str, Any]] = {}
    for spec in QUEUES:
        queue, dlq = queue_resource(spec.role), dead_letter_resource(spec.role)
        out[dlq] = {"Type": "AWS::SQS::Queue", "Properties": {
            "QueueName": {"Fn::Sub": "${AWS::StackName}-" + spec.role + "-dlq"},
            "MessageRetentionPeriod": DLQ_RETENTION_S, "SqsManagedSseEnabled": True}}
        out[queue] = {"Type": "AWS::SQS::Queue", "Properties": {
            "QueueName": {"Fn::Sub": "${AWS::StackName}-" + spec.role},
            "VisibilityTimeout": VISIBILITY_PER_TIMEOUT * spec.timeout_s,
            # SSE-SQS rather than a KMS key: S3 notifications can deliver to it (an AWS-managed key could not).
            "SqsManagedSseEnabled": True,
            "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
                              "maxReceiveCount": {"Ref": "MaxReceiveCount"}}}}
        consume = {"Sid": "ConsumeQueue", "Effect": "Allow",
                   "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                              "sqs:ChangeMessageVisibility"],
                   "Resource": {"Fn::GetAtt": [queue, "Arn"]}}
        resources = function_resources(spec.function, spec.needs, first=[consume])
        name = to_cfn_resource_name(spec.function)
        if spec.parses:  # appended to the Globals' dependencies layer (SAM adds list-valued globals)
            resources[name]["Properties"]["Layers"] = [{"Ref": PARSERS_LAYER}]
        resources[name]["Properties"]["Events"] = {f"{name}SqsEventSource": {"Properties": {
            "Queue": {"Fn::GetAtt": [queue, "Arn"]},  # the queue created here (Chalice's names it by ARN)
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": spec.max_concurrency}}}}
        out.update(resources)
    return out


def function_resources(function: str, needs: frozenset[str], *,
                       first: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The role and log group of the Chalice function ``function`` (an ``app.py`` handler name), and the
    properties merged into it (``Role``, ``LoggingConfig``). The role may write its log group, read the DSN secret
    (and Qdrant's API key secret when the stack has one), use the ENI policy every VPC function has, do what the
    ``first`` statements allow, and what ``needs`` names:

    - ``bucket``: read, delete and list the drop bucket; ``read_bucket``: read and list it (a missing key then
      reads as 404, not 403);
    - ``queues``: send to every queue; ``queue:<role>``: send to that one;
    - ``models``: invoke (and stream) the ``EmbeddingModel`` and ``ChatModel`` foundation models;
      ``embedding_model``: invoke the embedding model only.

    Raises:
        ValueError: an unknown need (a typo in the jobs or message table).
    """
    from chalice.utils import to_cfn_resource_name

    from chalicelib.dispatch.table import QUEUES

    name = to_cfn_resource_name(function)
    role, logs = f"{name}FunctionRole", f"{name}LogGroup"
    statements: list[dict[str, Any]] = [
        {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": {"Fn::GetAtt": [logs, "Arn"]}},
        {"Sid": "DatabaseSecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
         "Resource": {"Ref": "DatabaseSecret"}},
        {"Fn::If": ["HasQdrantApiKey", {"Sid": "QdrantApiKey", "Effect": "Allow",
                                        "Action": "secretsmanager:GetSecretValue",
                                        "Resource": {"Ref": "QdrantApiKeySecretArn"}}, {"Ref": "AWS::NoValue"}]},
        *(first or []),
    ]
    list_bucket = {"Sid": "ListBucket", "Effect": "Allow", "Action": "s3:ListBucket",
                   "Resource": {"Fn::GetAtt": ["DropBucket", "Arn"]}}
    sends = [q.role for q in QUEUES] if "queues" in needs else []
    for need in sorted(needs):
        if need == "bucket":
            statements += [{"Sid": "Bucket", "Effect": "Allow",
                            "Action": ["s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                            "Resource": {"Fn::Sub": "${DropBucket.Arn}/*"}}, list_bucket]
        elif need == "read_bucket":
            statements += [{"Sid": "ReadBucket", "Effect": "Allow", "Action": "s3:GetObject",
                            "Resource": {"Fn::Sub": "${DropBucket.Arn}/*"}}, list_bucket]
        elif need.startswith("queue:") and need.removeprefix("queue:") in {q.role for q in QUEUES}:
            sends.append(need.removeprefix("queue:"))
        elif need == "models":
            statements.append({"Sid": "InvokeModels", "Effect": "Allow",
                               "Action": ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
                               "Resource": [{"Fn::Sub": MODEL_ARN.format(parameter=p)}
                                            for p in ("EmbeddingModel", "ChatModel")]})
        elif need == "embedding_model":
            statements.append({"Sid": "InvokeEmbeddingModel", "Effect": "Allow", "Action": "bedrock:InvokeModel",
                               "Resource": {"Fn::Sub": MODEL_ARN.format(parameter="EmbeddingModel")}})
        elif need != "queues":
            raise ValueError(f"{function}: unknown need {need!r}")
    if sends:
        statements.append({"Sid": "SendToQueues", "Effect": "Allow", "Action": ["sqs:SendMessage", "sqs:GetQueueUrl"],
                           "Resource": [{"Fn::GetAtt": [queue_resource(r), "Arn"]} for r in dict.fromkeys(sends)]})
    return {
        name: {"Properties": {"Role": {"Fn::GetAtt": [role, "Arn"]},
                              "LoggingConfig": {"LogGroup": {"Ref": logs}, "LogFormat": "Text"}}},
        logs: {"Type": "AWS::Logs::LogGroup", "Properties": {
            "LogGroupName": {"Fn::Sub": "/aws/lambda/${AWS::StackName}/" + function.replace("_", "-")},
            "RetentionInDays": {"Ref": "LogRetentionDays"}}},
        role: {"Type": "AWS::IAM::Role", "Properties": {
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            "ManagedPolicyArns": [{"Fn::Sub": ENI_POLICY}],
            "Policies": [{"PolicyName": f"engram-{function.replace('_', '-')}",
                          "PolicyDocument": {"Version": "2012-10-17", "Statement": statements}}]}},
    }


def function_layers(template: dict[str, Any]) -> dict[str, list[str]]:
    """Each function of a synthesized SAM ``template`` (logical id) → the zip names (:data:`LAYER_ZIPS`) of our
    layers it runs with, the Globals' first (SAM adds a function's own after them). Layers that are not ours (the
    streaming front's public Lambda Web Adapter) are left out."""
    shared = template["Globals"]["Function"].get("Layers", [])
    layers: dict[str, list[str]] = {}
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            refs = [*shared, *resource["Properties"].get("Layers", [])]
            layers[name] = [LAYER_ZIPS[ref["Ref"]] for ref in refs
                            if isinstance(ref, dict) and ref.get("Ref") in LAYER_ZIPS]
    return layers


def queue_resource(role: str) -> str:
    """The template's logical id of the queue with ``role`` (``ingest`` → ``IngestQueue``)."""
    return f"{role.title()}Queue"


def dead_letter_resource(role: str) -> str:
    """The template's logical id of the dead-letter queue of the queue with ``role`` (``IngestDeadLetterQueue``)."""
    return f"{role.title()}DeadLetterQueue"


def add_generated(template: dict[str, Any]) -> None:
    """Merge :func:`queue_resources` and :func:`lane_resources` into a synthesized ``template`` (in place), and
    for every queue its ``ENGRAM_<ROLE>_QUEUE`` in every function's environment (its URL) and the outputs
    ``<Role>QueueUrl`` and ``<Role>DeadLetterQueueUrl``.

    Raises:
        KeyError: Chalice generated no function for a lane or a queue (``app.py`` and the tables disagree).
    """
    from chalicelib.dispatch.table import QUEUES

    resources = template["Resources"]
    for logical_id, resource in {**queue_resources(), **lane_resources()}.items():
        if "Type" in resource:
            resources[logical_id] = resource
        else:
            _merge(resources[logical_id], resource)
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    outputs = template.setdefault("Outputs", {})
    for spec in QUEUES:
        queue, dlq = queue_resource(spec.role), dead_letter_resource(spec.role)
        variables[spec.env] = {"Ref": queue}
        outputs[f"{queue}Url"] = {"Value": {"Ref": queue}}
        outputs[f"{dlq}Url"] = {"Value": {"Ref": dlq}}


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    """Deep-merge ``new`` into ``into`` as Chalice merges templates (dicts key by key, anything else replaced),
    except that an intrinsic function (``{"Ref": …}``, ``{"Fn::…": …}``) is a value: it replaces whatever was
    there (a ``Fn::GetAtt`` must not merge into Chalice's ``Fn::Sub``)."""
    for key, value in new.items():
        old = into.get(key)
        if isinstance(value, dict) and isinstance(old, dict) and not _intrinsic(value) and not _intrinsic(old):
            _merge(old, value)
        else:
            into[key] = value


def _intrinsic(value: dict[str, Any]) -> bool:
    """``value`` is a CloudFormation intrinsic function: one key, ``Ref`` or ``Fn::…``."""
    return len(value) == 1 and (next(iter(value)) == "Ref" or next(iter(value)).startswith("Fn::"))


def build_layers(out: Path, *, requirements: Path = PROJECT / "requirements.txt") -> dict[str, Path]:
    """pip-install ``requirements`` for Lambda (manylinux2014 x86_64, CPython 3.11, wheels only) and split the
    result into the three layer zips (``python/`` at their root, as Lambda expects): ``out/dependencies-layer.zip``
    (everything but the parsers' and the MCP SDK's requirements and what only they pull in),
    ``out/parsers-layer.zip`` and ``out/mcp-layer.zip`` (what each adds to the dependencies layer). Returns
    ``{"dependencies": path, "parsers": path, "mcp": path}``. Needs PyPI.

    Raises:
        subprocess.CalledProcessError: pip failed (e.g. a dependency without a matching wheel).
        RuntimeError: the parsers' or the MCP SDK's requirements change the version of a package the dependencies
            layer holds.
    """
    out.mkdir(parents=True, exist_ok=True)
    wanted = [line.strip() for line in requirements.read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")
              and _requirement_name(line) not in LAYER_EXCLUDED_REQUIREMENTS]
    extras = {"parsers": PARSER_REQUIREMENTS, "mcp": MCP_REQUIREMENTS}
    core = [line for line in wanted if not any(_requirement_name(line) in names for names in extras.values())]
    with tempfile.TemporaryDirectory() as tmp:
        base = _pip_install(core, Path(tmp) / "core")
        shared = {entry.name for entry in base.iterdir()}
        sites = {"dependencies": base}
        for layer, names in extras.items():
            full = _pip_install(core + [line for line in wanted if _requirement_name(line) in names],
                                Path(tmp) / f"full-{layer}")
            changed = sorted(name for name in shared if name.endswith(".dist-info") and not (full / name).exists())
            if changed:
                raise RuntimeError(f"the {layer} layer's requirements change these packages' versions: {changed}")
            sites[layer] = Path(tmp) / layer
            sites[layer].mkdir()
            for entry in full.iterdir():
                if entry.name not in shared:
                    shutil.move(str(entry), sites[layer] / entry.name)
        layers = {"dependencies": out / LAYER_ZIP, "parsers": out / PARSERS_LAYER_ZIP, "mcp": out / MCP_LAYER_ZIP}
        for site in sites.values():
            _prune(site)
            _strip(site)
        # Bytecode for what `import app` loads (every function's cold start); the parsers and the MCP SDK are
        # imported on first use.
        _compile_app_imports(base)
        for layer, site in sites.items():
            _zip_dir(site, layers[layer], prefix="python")
    return layers


def _pip_install(requirements: list[str], target: Path) -> Path:
    """``pip install --target target`` of ``requirements`` lines for Lambda's platform; returns ``target``."""
    listed = target.with_suffix(".txt")
    listed.write_text("\n".join(requirements) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(target),
         "--platform", LAMBDA_PLATFORM, "--implementation", "cp", "--python-version", LAMBDA_PYTHON,
         "--only-binary=:all:", "-r", str(listed)],
        check=True,
    )
    return target


def _prune(site: Path) -> None:
    """Delete what Lambda provides (:data:`RUNTIME_PROVIDED`) or never imports (:data:`PRUNED_DIRS`,
    :data:`PRUNED_SUFFIXES`, :data:`UNUSED_PARTS`) from an installed ``site`` folder."""
    for entry in list(site.iterdir()):
        name = entry.name.split("-", 1)[0].removesuffix(".py").lower()
        if name in RUNTIME_PROVIDED or (name == "python_dateutil"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for pattern in UNUSED_PARTS:
        for path in site.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for path in sorted(site.rglob("*"), reverse=True):  # children before parents
        if path.is_dir() and path.name in PRUNED_DIRS:
            shutil.rmtree(path)
        elif path.is_file() and path.suffix in PRUNED_SUFFIXES:
            path.unlink()


def _strip(site: Path) -> None:
    """Remove debug symbols from the extension modules in ``site`` (``strip --strip-unneeded``, what Lambda
    packagers' "slim" options do; ~3 MB, mostly cryptography's). Libraries that auditwheel vendored
    (``*.libs/``) are left alone: patchelf rewrote them, and strip can break such files. Without binutils'
    ``strip`` on the PATH nothing is stripped."""
    strip = shutil.which("strip")
    if strip is None:
        return
    for path in site.rglob("*.so"):
        if not any(part.endswith(".libs") for part in path.relative_to(site).parts):
            subprocess.run([strip, "--strip-unneeded", str(path)], check=True, capture_output=True)


def _requirement_name(line: str) -> str:
    """The normalised project name (PEP 503) at the start of a requirements line (``psycopg[binary]>=3`` →
    ``psycopg``, ``pdfminer.six`` → ``pdfminer-six``)."""
    name = line.strip()
    for stop in "[<>=!~; ":
        name = name.split(stop, 1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _zip_dir(source: Path, archive: Path, *, prefix: str) -> None:
    """Zip ``source`` into ``archive`` under ``prefix/``, keeping file modes (and the bytecode written by
    :func:`_compile_app_imports`: pip installs with ``--no-compile``, so there is no other)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(source.rglob("*")):
            if not path.is_dir():
                zf.write(path, f"{prefix}/{path.relative_to(source).as_posix()}")


def bytecode_applies() -> bool:
    """Whether this interpreter writes the bytecode Lambda's runtime reads: CPython 3.11 (``cpython-311``, the
    ``LAMBDA_PYTHON`` cache tag) on Linux x86_64, where the layers' binaries also load for the import trace."""
    return (sys.implementation.cache_tag == "cpython-" + LAMBDA_PYTHON.replace(".", "")
            and sys.platform == "linux" and platform.machine() == "x86_64")


def _compile(source: Path, cfile: Path) -> None:
    """Compile ``source`` to ``cfile`` with unchecked-hash invalidation: Lambda's file system is read-only and
    its extracted files' times are not ours, so the runtime must use the bytecode without comparing (PEP 552)."""
    py_compile.compile(str(source), cfile=str(cfile), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)


def add_bytecode(archive: Path) -> int:
    """Add bytecode for every ``.py`` of the code package ``archive`` (``__pycache__/<name>.cpython-311.pyc``
    beside it) when :func:`bytecode_applies`; returns how many. Lambda cannot write bytecode caches, so without
    them every cold start compiles all of Engram's modules again (~190 ms of ``import app`` on these machines,
    benchmarks/coldstart.py)."""
    if not bytecode_applies():
        return 0
    with zipfile.ZipFile(archive) as zf:
        sources = [name for name in zf.namelist() if name.endswith(".py")]
        with tempfile.TemporaryDirectory() as tmp:
            compiled = []
            for name in sources:
                source, cached = Path(tmp) / name, importlib.util.cache_from_source(name)
                source.parent.mkdir(parents=True, exist_ok=True)
                source.write_bytes(zf.read(name))
                _compile(source, Path(tmp) / cached)
                compiled.append((Path(tmp) / cached, cached))
            with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as out:
                for path, cached in compiled:
                    out.write(path, cached)
    return len(sources)


_IMPORTED = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); import app; "
             "print(json.dumps(sorted({getattr(m, '__file__', None) or '' for m in list(sys.modules.values())})))")


def runtime_sdk(dest: Path, *, also: tuple[str, ...] = ()) -> Path:
    """``dest`` (created) holding links to this interpreter's copies of what Lambda's runtime provides
    (:data:`RUNTIME_PROVIDED`, the AWS SDK) and of the packages ``also`` names: stands in for ``/var/runtime``
    on the import path."""
    dest.mkdir(parents=True)
    for name in (*RUNTIME_PROVIDED, *also):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        source = origin.parent if spec.submodule_search_locations else origin
        (dest / source.name).symlink_to(source, target_is_directory=source.is_dir())
    return dest


def _compile_app_imports(site: Path) -> int:
    """Write bytecode into the layer folder ``site`` for its modules that ``import app`` loads (traced in an
    isolated interpreter whose path is the project, ``site``, the runtime's SDK and Chalice, whose runtime the code
    package carries) when
    :func:`bytecode_applies`; returns how many. Only those: the rest of the layer is imported later or never, and
    bytecode for all of it would add ~9 MB. Without it Lambda compiles them on every cold start (~180 ms)."""
    if not bytecode_applies():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        paths = [str(PROJECT), str(site), str(runtime_sdk(Path(tmp) / "runtime", also=("chalice",)))]
        done = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", _IMPORTED, json.dumps(paths)], cwd=tmp,
                              capture_output=True, text=True, check=True, env={"ENGRAM_METRICS": "off"})
    loaded = [Path(f) for f in json.loads(done.stdout) if f.endswith(".py") and Path(f).is_relative_to(site)]
    for source in loaded:
        _compile(source, Path(importlib.util.cache_from_source(str(source))))
    return len(loaded)


def main(argv: list[str] | None = None) -> int:
    """``python -m infra.build {layer,package,all} [--out DIR]``; prints the files written."""
    parser = argparse.ArgumentParser(prog="python -m infra.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("layer", "package", "all"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    parser.add_argument("--drop-tenants", default="",
                        help="comma-separated tenants that get a drop-writer policy (their <tenant>/* prefix only)")
    args = parser.parse_args(argv)
    drop_tenants = tuple(t.strip() for t in args.drop_tenants.split(",") if t.strip())
    if args.what in ("layer", "all"):
        for path in build_layers(args.out).values():
            print(path)
    if args.what in ("package", "all"):
        try:
            template = synthesize(args.out, drop_tenants=drop_tenants)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except subprocess.CalledProcessError as exc:
            print(exc.stdout, exc.stderr, sep="\n", file=sys.stderr)
            return 1
        print(template)
        print(args.out / CODE_ZIP)
        for layer in LAYER_ZIPS.values():
            if not (args.out / layer).exists():
                print(f"note: {args.out / layer} is missing; run `python -m infra.build layer` before deploying",
                      file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
