"""The deployment synthesized once per session, offline: the SAM template (``chalice package`` on a staging copy,
merged with infra/template.yaml) and the CloudFormation it expands to (aws-sam-translator, run locally the way
CloudFormation runs the ``AWS::Serverless-2016-10-31`` transform)."""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from infra import build

# The pseudo parameters CloudFormation supplies when it runs the transform (a stack named engram in us-east-1).
PSEUDO_PARAMETERS = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
                     "AWS::StackName": "engram"}


class _NoManagedPolicyLookups:
    """The translator asks this for managed policy names only when a function uses SAM ``Policies``; ours don't."""

    def load(self) -> dict[str, str]:
        raise AssertionError("the template must not need IAM managed-policy lookups")


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of ``infra.build.synthesize``: template.json and deployment.zip."""
    out = tmp_path_factory.mktemp("aws")
    build.synthesize(out, work=tmp_path_factory.mktemp("staging"))
    return out


@pytest.fixture(scope="session")
def sam_template(synthesized: Path) -> dict[str, Any]:
    """The SAM template as written (what `sam deploy` / `aws cloudformation package` receive)."""
    return json.loads((synthesized / build.TEMPLATE_NAME).read_text())


@pytest.fixture(scope="session")
def cfn(sam_template: dict[str, Any]) -> dict[str, Any]:
    """The template after the SAM transform: plain CloudFormation resources."""
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    template = copy.deepcopy(sam_template)
    # What `aws cloudformation package` / `sam deploy` do to local paths before CloudFormation sees them.
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and props[key].startswith("./"):
                props[key] = "s3://artifacts/" + props[key][2:]
    translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name="us-east-1"))
    return translator.translate(template, parameter_values=dict(PSEUDO_PARAMETERS),
                                get_managed_policy_map=_NoManagedPolicyLookups().load)


@pytest.fixture(scope="session")
def code_zip(synthesized: Path) -> zipfile.ZipFile:
    """The code package every function runs."""
    return zipfile.ZipFile(synthesized / build.CODE_ZIP)
