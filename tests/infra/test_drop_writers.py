"""Per-tenant drop-writer policies (issue 15 §5): ``infra.build.synthesize(drop_tenants=...)`` adds one IAM managed
policy per tenant scoped to ``<tenant>/*`` of the drop bucket; the template stays cfn-lint clean; and the policies,
enforced by moto's IAM, let a tenant's writer write its own prefix only."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import boto3
import cfnlint.api
import pytest

from infra import build
from tests.infra.conftest import PSEUDO_PARAMETERS

TENANTS = ("acme", "beta.team")


@pytest.fixture(scope="module")
def with_writers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The SAM template synthesized with a drop-writer policy for each of :data:`TENANTS`."""
    out = tmp_path_factory.mktemp("aws-writers")
    path = build.synthesize(out, work=tmp_path_factory.mktemp("staging-writers"), drop_tenants=TENANTS)
    return json.loads(Path(path).read_text())


def _policies(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in template["Resources"].items() if r["Type"] == "AWS::IAM::ManagedPolicy"}


def test_one_policy_per_tenant_scoped_to_its_prefix_and_lint_clean(with_writers: dict[str, Any]) -> None:
    matches = cfnlint.api.lint(json.dumps(with_writers), regions=["us-east-1"])
    assert [f"{m.rule.id} {m.message}" for m in matches] == []
    policies = _policies(with_writers)
    assert len(policies) == len(TENANTS)
    for tenant in TENANTS:
        (name, props), = [(n, p) for n, p in policies.items() if f"tenant {tenant} " in p["Description"]]
        allow, listing, deny = props["PolicyDocument"]["Statement"]
        assert allow["Effect"] == "Allow" and "s3:PutObject" in allow["Action"]
        assert allow["Resource"] == {"Fn::Sub": "${DropBucket.Arn}/" + tenant + "/*"}
        assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{tenant}/*"]}}
        assert deny["Effect"] == "Deny" and deny["Resource"]["Fn::Sub"].endswith(f"/{tenant}/uploads/upload_*")
        assert with_writers["Outputs"][f"{name}Arn"]["Value"] == {"Ref": name}


@pytest.mark.parametrize("bad", ["files", "a/b", "acme*", "${AWS::Region}", "", "-x", "acme?"])
def test_a_tenant_that_cannot_be_a_prefix_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        build.drop_writer_resources((bad,))
    with pytest.raises(ValueError, match="twice"):
        build.drop_writer_resources(("acme", "acme"))


def _resolve(value: Any, bucket: str) -> Any:
    """The template's policy document with ``${DropBucket.Arn}`` and ``Fn::GetAtt DropBucket.Arn`` filled in."""
    arn = f"arn:aws:s3:::{bucket}"
    if isinstance(value, dict):
        if "Fn::Sub" in value:
            return value["Fn::Sub"].replace("${DropBucket.Arn}", arn)
        if value.get("Fn::GetAtt") == ["DropBucket", "Arn"]:
            return arn
        return {k: _resolve(v, bucket) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, bucket) for v in value]
    return value


def test_a_tenants_writer_writes_its_own_prefix_only(with_writers: dict[str, Any], monkeypatch) -> None:
    from moto import mock_aws
    from moto.core import set_initial_no_auth_action_count

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    region = PSEUDO_PARAMETERS["AWS::Region"]
    bucket = "engram-drop-123456789012-us-east-1"
    (document,) = [copy.deepcopy(p["PolicyDocument"]) for p in _policies(with_writers).values()
                   if "tenant acme " in p["Description"]]

    @set_initial_no_auth_action_count(5)  # the setup below runs as root; every later call is checked
    def run() -> None:
        iam = boto3.client("iam", region_name=region)
        s3 = boto3.client("s3", region_name=region)
        s3.create_bucket(Bucket=bucket)
        iam.create_user(UserName="acme-writer")
        iam.put_user_policy(UserName="acme-writer", PolicyName="drop-writer",
                            PolicyDocument=json.dumps(_resolve(document, bucket)))
        key = iam.create_access_key(UserName="acme-writer")["AccessKey"]
        writer = boto3.client("s3", region_name=region, aws_access_key_id=key["AccessKeyId"],
                              aws_secret_access_key=key["SecretAccessKey"])
        writer.put_object(Bucket=bucket, Key="acme/handbook/a.txt", Body=b"acme's own")
        writer.delete_object(Bucket=bucket, Key="acme/handbook/a.txt")
        for forbidden in ("beta.team/handbook/a.txt", "files/acme/file-x", "acme/uploads/upload_1/part_1",
                          "acmeish/handbook/a.txt"):
            with pytest.raises(writer.exceptions.ClientError) as denied:
                writer.put_object(Bucket=bucket, Key=forbidden, Body=b"planted")
            assert denied.value.response["Error"]["Code"] == "AccessDenied", forbidden

    with mock_aws():
        run()
