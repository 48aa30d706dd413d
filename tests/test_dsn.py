"""The deployed database URL: Secrets Manager (moto) → libpq connection string, and clear errors for bad secrets."""

from __future__ import annotations

import dataclasses
import json

import boto3
import psycopg
import pytest
from moto import mock_aws

from chalicelib.config import Settings
from chalicelib.errors import ConfigurationError
from chalicelib.store import db, dsn


def test_rds_json_secret_becomes_a_tls_conninfo() -> None:
    url = dsn.url_from_secret(json.dumps({"username": "engram", "password": "p@ss word", "host": "proxy.example",
                                          "port": 5432, "dbname": "engram", "engine": "postgres"}))
    parts = psycopg.conninfo.conninfo_to_dict(url)
    assert parts == {"host": "proxy.example", "port": "5432", "dbname": "engram", "user": "engram",
                     "password": "p@ss word", "sslmode": "require"}


def test_url_secret_is_used_as_is() -> None:
    assert dsn.url_from_secret(" postgresql://u:p@h:5432/d \n") == "postgresql://u:p@h:5432/d"


@pytest.mark.parametrize("secret", ["not json", json.dumps({"username": "u", "host": "h"}), "[]"])
def test_bad_secret_names_the_setting(secret: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        dsn.url_from_secret(secret)
    assert err.value.setting == "ENGRAM_DATABASE_SECRET_ARN" and err.value.status == 500


def test_database_url_reads_the_secret_once(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    dsn.url_from_secret_arn.cache_clear()
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="eu-west-1")
        arn = client.create_secret(Name="engram/dsn", SecretString=database_url)["ARN"]
        settings = dataclasses.replace(Settings(), database_secret_arn=arn, aws_region="eu-west-1")
        assert db.database_url(settings) == database_url
        client.put_secret_value(SecretId=arn, SecretString="postgresql://changed@h/d")
        assert db.database_url(settings) == database_url  # cached for the process (a Lambda container)
    dsn.url_from_secret_arn.cache_clear()
