"""Fake external services for tests: real HTTP servers on 127.0.0.1 with scripted behaviour (see
:mod:`tests.fakes.chat_server`)."""
