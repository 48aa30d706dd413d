"""The local AWS stack: a moto server (S3, SQS, Secrets Manager) on this machine, provisioned as the deployment is —
the drop bucket, one queue per ``@app.on_sqs_message`` source with a dead-letter queue and redrive policy, the bucket
notification (``s3:ObjectCreated:*`` and ``s3:ObjectRemoved:*`` → the ingest queue) and a secret holding the DSN.

The running stack is described by a state file (``<data_dir>/local-stack.json``, :class:`StackState`) so other
processes (``engram pump``, ``drop``, ``redrive``, ``stats``) find it; :meth:`StackState.env` is the environment a
handler needs to reach it. moto keeps everything in memory; the bucket's objects are mirrored to
``<data_dir>/s3/<bucket>/`` as they are written (:mod:`engram_cli.local.s3_disk`) and loaded back when a stack starts
on the same data directory. Queued messages are not kept: the work they carried is re-sent from the database when
``engram serve`` starts (:mod:`engram_cli.local.resume`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# LocalStack's well-known edge port, so tools configured for a local AWS endpoint find this one too.
DEFAULT_PORT = 4566
STATE_FILE = "local-stack.json"
# Held (flock, exclusive) by the one stack running on a data folder for as long as its process lives: the kernel
# releases it when the process ends, even by SIGKILL, so a crash never leaves the folder locked.
LOCK_FILE = "local-stack.lock"
OBJECTS_DIR = "s3"  # <data_dir>/s3/<bucket>/: the bucket's objects, kept across restarts
DEFAULT_BUCKET = "engram-local"
DLQ_SUFFIX = "-dlq"
# Chalice's default Lambda timeout (``lambda_timeout``, seconds), for queues whose consumer sets none. AWS asks for a
# source-queue visibility timeout of at least 6× the function timeout ("Configuring an Amazon SQS queue to use with
# Lambda", Lambda developer guide); locally the pump is the only consumer, so one function timeout is enough and
# keeps redelivery after a crash reasonably quick.
DEFAULT_VISIBILITY_TIMEOUT_S = 60
DLQ_RETENTION_S = 14 * 24 * 3600  # the SQS maximum (MessageRetentionPeriod, seconds)
SECRET_NAME = "engram/database"
# boto3 reads service-specific endpoints from these (AWS SDKs "Service-specific endpoints" guide); scoped per service
# so a Bedrock or real-AWS client in the same process is not redirected to moto.
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SECRETS_MANAGER")
# What the Responses API's mcp tool may reach on the local stack besides public addresses: this machine.
LOCAL_MCP_HOSTS = "localhost,127.0.0.0/8,::1"
# moto accepts any credentials; these are only set when the environment has none.
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@dataclass(frozen=True)
class StackState:
    """A provisioned stack: ``endpoint`` (``http://127.0.0.1:4566``), ``region``, ``bucket``, ``queues`` (queue name
    → URL, dead-letter queues included), ``roles`` (role such as ``"ingest"`` → queue name), ``dead_letter``
    (source queue name → its DLQ name), ``notify_queue`` (the queue the bucket notifies), ``secret_arn`` (the DSN
    secret, or None), ``pid`` of the process serving moto, ``api`` (the HTTP API's root once it serves)."""

    endpoint: str
    region: str
    bucket: str
    queues: dict[str, str]
    roles: dict[str, str]
    dead_letter: dict[str, str]
    notify_queue: str
    secret_arn: str | None = None
    pid: int = field(default_factory=os.getpid)
    api: str | None = None  # the HTTP API's root (``http://127.0.0.1:8000/v1``) once it serves

    def queue_url(self, name: str) -> str:
        """The URL of queue ``name``.

        Raises:
            KeyError: the stack has no such queue.
        """
        return self.queues[name]

    def env(self) -> dict[str, str]:
        """Environment variables a handler (or any boto3 client) needs to use this stack: the per-service endpoint
        URLs, the region, ``ENGRAM_BUCKET``, and each queue of the message table that the stack has (by role) under
        its setting's variable (``ENGRAM_INGEST_QUEUE``, ``ENGRAM_EMBED_QUEUE``, ...; URLs), and, unless it is set,
        ``ENGRAM_MCP_ALLOWED_HOSTS`` allowing loopback (MCP servers on this machine)."""
        from chalicelib import config
        from chalicelib.dispatch.table import QUEUES

        env = {name: self.endpoint for name in ENDPOINT_ENV}
        env.update({"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region, config.ENV_BUCKET: self.bucket})
        if not os.environ.get(config.ENV_MCP_ALLOWED_HOSTS):  # the Responses API's mcp tool may call local servers
            env[config.ENV_MCP_ALLOWED_HOSTS] = LOCAL_MCP_HOSTS
        for spec in QUEUES:
            if spec.role in self.roles:
                env[spec.env] = self.queues[self.roles[spec.role]]
        return env

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` talking to this stack."""
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name=self.region, **credentials())

    def save(self, data_dir: Path) -> Path:
        """Write the state file under ``data_dir`` (created if missing); returns its path."""
        path = Path(data_dir) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)
        return path


@functools.cache
def credentials() -> dict[str, str]:
    """Explicit dummy credentials when boto3 finds none (moto accepts anything); else {} (use the configured)."""
    import boto3

    if boto3.Session().get_credentials() is None:
        return {"aws_access_key_id": DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}
    return {}


def apply_env(state: StackState, environ: Any = None) -> dict[str, str | None]:
    """Export :meth:`StackState.env` (plus dummy credentials when none are configured) into ``environ`` (default
    ``os.environ``); returns the previous values (None: was unset) for :func:`restore_env`. Callers reading
    :func:`chalicelib.config.settings` afterwards must clear its cache."""
    environ = os.environ if environ is None else environ
    values = {**(DUMMY_CREDENTIALS if credentials() else {}), **state.env()}
    previous = {name: environ.get(name) for name in values}
    environ.update(values)
    return previous


def restore_env(previous: dict[str, str | None], environ: Any = None) -> None:
    """Undo :func:`apply_env`: set back (or unset) every variable it changed."""
    environ = os.environ if environ is None else environ
    for name, value in previous.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


def load_state(data_dir: Path) -> StackState | None:
    """The stack described by ``<data_dir>/local-stack.json`` if its endpoint answers; None when there is no state
    file or the stack is gone (a stale file from a killed process is ignored)."""
    path = Path(data_dir) / STATE_FILE
    try:
        state = StackState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    import httpx

    try:
        httpx.get(f"{state.endpoint}/moto-api/", timeout=2.0)
    except httpx.HTTPError:
        return None
    return state


def provision(endpoint: str, region: str, *, bucket: str, queues: dict[str, str], notify_queue: str,
              max_receives: int, visibility_timeout_s: int | dict[str, int] = DEFAULT_VISIBILITY_TIMEOUT_S,
              dsn: str | None = None) -> StackState:
    """Create (idempotently) on the AWS endpoint ``endpoint``: ``bucket``; for every queue of ``queues`` (role →
    queue name) a dead-letter queue ``<name>-dlq`` (14-day retention) and the queue itself (``VisibilityTimeout``
    seconds — one value, or queue name → seconds with :data:`DEFAULT_VISIBILITY_TIMEOUT_S` for the rest —,
    ``RedrivePolicy`` with ``maxReceiveCount`` = ``max_receives``); the bucket notification sending
    ``s3:ObjectCreated:*`` and ``s3:ObjectRemoved:*`` to the queue named ``notify_queue``; and, when ``dsn`` is
    given, the secret ``engram/database`` holding it (the plain-URL form :mod:`chalicelib.store.dsn` reads).

    Raises:
        ValueError: ``notify_queue`` is not one of ``queues``.
        botocore.exceptions.ClientError: the endpoint refused a call.
    """
    if notify_queue not in queues.values():
        raise ValueError(f"notify_queue {notify_queue!r} is not one of the queues {sorted(queues.values())}")
    state = StackState(endpoint=endpoint, region=region, bucket=bucket, queues={}, roles=dict(queues),
                       dead_letter={}, notify_queue=notify_queue)
    sqs, s3 = state.client("sqs"), state.client("s3")
    s3.create_bucket(Bucket=bucket)  # us-east-1 needs no LocationConstraint; moto accepts it for any region
    arns: dict[str, str] = {}
    for name in queues.values():
        dlq = name + DLQ_SUFFIX
        dlq_url = sqs.create_queue(QueueName=dlq,
                                   Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_S)})["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(QueueName=name, Attributes={
            "VisibilityTimeout": str(int(visibility_timeout_s if isinstance(visibility_timeout_s, int)
                                         else visibility_timeout_s.get(name, DEFAULT_VISIBILITY_TIMEOUT_S))),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receives)}),
        })["QueueUrl"]
        arns[name] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        state.queues.update({name: url, dlq: dlq_url})
        state.dead_letter[name] = dlq
    # As in AWS, the queue policy lets S3 send to it (moto does not enforce it).
    sqs.set_queue_attributes(QueueUrl=state.queues[notify_queue], Attributes={"Policy": json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sqs:SendMessage",
                       "Resource": arns[notify_queue],
                       "Condition": {"ArnLike": {"aws:SourceArn": f"arn:aws:s3:::{bucket}"}}}]})})
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"QueueConfigurations": [{
        "Id": "engram-drop", "QueueArn": arns[notify_queue],
        "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
    secret_arn = None
    if dsn:
        secrets = state.client("secretsmanager")
        try:
            secret_arn = secrets.create_secret(Name=SECRET_NAME, SecretString=dsn)["ARN"]
        except secrets.exceptions.ResourceExistsException:
            secret_arn = secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=dsn)["ARN"]
    return StackState(endpoint=endpoint, region=region, bucket=bucket, queues=state.queues, roles=dict(queues),
                      dead_letter=state.dead_letter, notify_queue=notify_queue, secret_arn=secret_arn)


class LocalStack:
    """moto's threaded server on ``host:port`` (0: a free port) in this process, provisioned by :func:`provision`.

    Use :meth:`start` / :meth:`stop` (or as a context manager). :meth:`start` resets moto's in-memory backends
    (shared by every moto server and mock of the process), provisions, writes the state file under ``data_dir`` and,
    with ``export_env``, exports the stack's environment to this process (:func:`apply_env`); :meth:`stop` removes
    the state file, restores the environment and stops the server. With ``keep_objects`` the bucket's objects are
    loaded from ``<data_dir>/s3/<bucket>/`` at start and every write is mirrored there (:mod:`s3_disk`).
    """

    def __init__(self, data_dir: Path, *, queues: dict[str, str], notify_queue: str, max_receives: int,
                 bucket: str = DEFAULT_BUCKET, region: str = "us-east-1", host: str = "127.0.0.1",
                 port: int = DEFAULT_PORT,
                 visibility_timeout_s: int | dict[str, int] = DEFAULT_VISIBILITY_TIMEOUT_S,
                 dsn: str | None = None, export_env: bool = False, keep_objects: bool = True) -> None:
        self._data_dir = Path(data_dir)
        self._bucket, self._keep_objects = bucket, keep_objects
        self._export_env = export_env
        self._previous_env: dict[str, str | None] = {}
        self._provision = functools.partial(provision, bucket=bucket, queues=dict(queues), notify_queue=notify_queue,
                                            max_receives=max_receives, visibility_timeout_s=visibility_timeout_s,
                                            dsn=dsn)
        self._region, self._host, self._port = region, host, port
        self._server: Any = None
        self._lock = FolderLock(self._data_dir)
        self.state: StackState | None = None

    def start(self) -> StackState:
        """Take the data folder's lock, start moto, provision, write the state file; returns the state.

        Raises:
            StackRunningError: another stack runs on the same data folder (its PID and addresses in the message).
            OSError: the port is taken (another stack, or LocalStack, is running).
        """

        from engram_cli.local import moto_fixes

        moto_fixes.apply()
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per SQS poll
        self._lock.acquire()
        try:
            return self._start()
        except BaseException:
            self._lock.release()
            raise

    def _start(self) -> StackState:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        from engram_cli.local import s3_disk

        _check_port_free(self._host, self._port)
        self._server = ThreadedMotoServer(ip_address=self._host, port=self._port, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        import httpx

        # moto's backends are per process, not per server: start from nothing, as a new process does.
        httpx.post(f"http://{host}:{port}/moto-api/reset", timeout=10.0).raise_for_status()
        self.state = self._provision(f"http://{host}:{port}", self._region)
        if self._keep_objects:
            folder = self.objects_dir
            restored = s3_disk.restore(self._bucket, folder) if s3_disk.install() else 0
            s3_disk.keep(self._bucket, folder)
            if restored:
                logging.getLogger("engram.local").info("restored %d object(s) of %s from %s", restored,
                                                       self._bucket, folder)
        self.state.save(self._data_dir)
        if self._export_env:
            self._previous_env = apply_env(self.state)
        return self.state

    def stop(self) -> None:
        """Remove the state file (if it is still ours), restore the environment, stop the server, release the data
        folder."""
        path = self._data_dir / STATE_FILE
        try:  # only the stack that wrote it (it started, and holds the folder) removes the state file
            if self._lock.held and json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass
        restore_env(self._previous_env)
        self._previous_env = {}
        if self._keep_objects:
            from engram_cli.local import s3_disk

            s3_disk.forget(self._bucket)
        if self._server is not None:
            self._server.stop()
            self._server = None
        self._lock.release()

    def record_api(self, url: str) -> None:
        """Note the HTTP API's root in the state file (``api``), for whoever finds the folder taken."""
        if self.state is not None:
            self.state = dataclasses.replace(self.state, api=url)
            self.state.save(self._data_dir)

    @property
    def objects_dir(self) -> Path:
        """Where the bucket's objects are kept: ``<data_dir>/s3/<bucket>``."""
        return self._data_dir / OBJECTS_DIR / self._bucket

    def __enter__(self) -> StackState:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class StackRunningError(RuntimeError):
    """Another stack already runs on this data folder (one stack per data folder); the message names its process
    and addresses."""


class FolderLock:
    """The exclusive lock of one data folder (:data:`LOCK_FILE`, ``fcntl.flock``): held by the running stack, given
    back by :meth:`release` or by the end of its process."""

    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / LOCK_FILE
        self._file: Any = None

    def acquire(self) -> None:
        """Take the lock, or refuse.

        Raises:
            StackRunningError: another process holds it; the message names that stack's PID and addresses.
        """
        import fcntl

        self._path.parent.mkdir(parents=True, exist_ok=True)
        handle = self._path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise StackRunningError(_running_message(self._path.parent)) from None
        self._file = handle

    @property
    def held(self) -> bool:
        """Whether this lock holds the folder."""
        return self._file is not None

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._file is not None:
            self._file.close()  # closing the descriptor releases the flock
            self._file = None


def _running_message(data_dir: Path) -> str:
    """Who holds ``data_dir``: the state file's PID and addresses when it can be read."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        state = {}
    where = ", ".join(f"{label} {state[key]}" for key, label in (("endpoint", "AWS endpoint"), ("api", "API"))
                      if state.get(key))
    who = f"process {state['pid']}" if state.get("pid") else "another process"
    return (f"An Engram stack already runs on the data folder {data_dir} ({who}{', ' + where if where else ''}). "
            "One stack per data folder: stop that one first (Ctrl-C in its terminal), or give this one another "
            "folder (ENGRAM_DATA_DIR).")


def _check_port_free(host: str, port: int) -> None:
    """Raise ``OSError`` naming the port when something already listens on ``host:port`` (0 is always free).
    werkzeug would otherwise fail inside moto's thread, where the error is lost."""
    import socket

    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(f"{host}:{port} is already in use (another `engram serve`, or LocalStack?); "
                          f"pick another with --aws-port") from exc

