"""Offline checks of the AWS deployment (infra/)."""
