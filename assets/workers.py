"""Runs on Celery workers: the broker the service starts for its own workers, and the worker
command (`whitebit-etl worker`) for this machine or any other.

A worker is dagster-celery's: ``celery -A assets.celery_app worker`` (dagster-celery's application,
a task a lost broker kept handed out again within a minute) takes the ``execute_job`` tasks the
instance's ``CeleryRunLauncher`` sends, and runs each in a process of its pool
(`dagster_celery.tasks.create_execute_job_task`: the run executes in that process, its events
going to the instance of ``DAGSTER_HOME``). ``dagster-celery worker start`` would run the same
command as a child of its own, after writing the broker's URL (password and all) into a module
under ``DAGSTER_HOME``; the worker here runs it in its own place (``exec``), its broker and result
backend read by Celery itself from ``CELERY_BROKER_URL`` and ``CELERY_RESULT_BACKEND``: nothing is
written but the instance's dagster.yaml, which names the variables, never their values.

Each pool process runs one run and is replaced (``--max-tasks-per-child 1``): a run starts in a
fresh process, as a run of the default launcher does, so a changed accounts file or new code is
taken at the next run, and a run's memory goes with its process.

`LocalBroker` is Debian's ``redis-server`` on a free loopback port with a password made for it,
its configuration handed over on its standard input (never on a command line another user could
read, never in a file). It writes every change to an append-only file before it answers: killed
and started again by the service, it reloads its queue and its tasks' states. A service started
again starts a new one, and the runs the old one held are failed by the run monitoring (their
tasks unknown).
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import redis
import yaml
from rich.console import Console

from assets.instance import BACKEND_ENV, BROKER_ENV, Broker, InstanceError, instance_home
from assets.settings import Settings

#: The queue dagster-celery's launcher sends runs to (unless a run's ``dagster-celery/queue``
#: tag names another).
QUEUE: Final = "dagster"
#: The Celery application whose tasks run Dagster runs (dagster-celery's, `assets.celery_app`).
CELERY_APP: Final = "assets.celery_app"
#: Runs one worker takes at once when not told.
DEFAULT_CONCURRENCY: Final = 2
_BROKER_STARTUP_S: Final = 30.0


class WorkerError(InstanceError):
    """A worker cannot start as configured; the message says what to change."""


def tool(name: str) -> str:
    """A console script of this environment (beside its python), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def worker_command(concurrency: int, name: str) -> list[str]:
    """The Celery worker's command: what ``dagster-celery worker start`` runs, and a fresh
    process per run."""
    return [
        tool("celery"), "-A", CELERY_APP, "worker",
        "--prefetch-multiplier=1", "--max-tasks-per-child=1",
        "--concurrency", str(concurrency), "-Q", QUEUE, "-n", f"{name}@%h",
        "--loglevel", "INFO", "--without-gossip", "--without-mingle",
    ]  # fmt: skip


def run_worker(console: Console, settings: Settings, concurrency: int, name: str) -> None:
    """Become a Celery worker of the instance (never returns): the instance's home made ready
    (its dagster.yaml written when missing), then Celery in this process's place, its
    environment naming the home, the broker and the result backend."""
    broker = Broker.of(settings)
    if broker is None:
        raise WorkerError(
            f"{BROKER_ENV} is not set: a worker takes its runs from the Celery broker the service "
            "launches them to (like redis://:password@broker-host:6379/0)"
        )
    home, storage = instance_home(settings, celery=True)
    command = worker_command(concurrency, name)
    console.print(
        f"whitebit-etl worker {name}: {concurrency} run(s) at once from queue {QUEUE}; instance "
        f"{home} ({storage}); broker and result backend from {BROKER_ENV}, {BACKEND_ENV}"
    )
    sys.stdout.flush()
    sys.stderr.flush()
    env = settings.child_env({"DAGSTER_HOME": str(home), **broker.env()})
    os.execve(command[0], command, env)  # noqa: S606 - Celery's own command, this environment's


def slots_per_worker(home: Path, workers: int) -> int:
    """Runs each of ``workers`` workers takes at once: together, the instance's run queue limit
    (``max_concurrent_runs``), so that no launched run waits in the broker past the run
    monitoring's start timeout."""
    loaded = yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8")) or {}
    limit = ((loaded.get("concurrency") or {}).get("runs") or {}).get("max_concurrent_runs")
    return max(1, math.ceil(int(limit) / workers)) if limit else DEFAULT_CONCURRENCY


#: Where the service's own Redis keeps its append-only file, in its directory.
APPEND_ONLY_DIR: Final = "appendonlydir"


class LocalBroker:
    """Debian's ``redis-server`` on a free loopback port, a password of its own; `url` names it
    (database 0 the broker's, 1 the results')."""

    def __init__(self, port: int, directory: Path) -> None:
        self.port = port
        self.directory = directory
        self._password = secrets.token_urlsafe(24)
        self.popen: subprocess.Popen[bytes] | None = None

    def url(self, database: int) -> str:
        return f"redis://:{self._password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> subprocess.Popen[bytes]:
        server = shutil.which("redis-server")
        if server is None:
            raise WorkerError(
                f"--workers needs a Celery broker: set {BROKER_ENV}, or install Debian's "
                "redis-server (scripts/ensure-redis does) for the service to start its own"
            )
        if self.popen is None:
            # A service's first start: the queue and the tasks of an earlier service are not its
            # (that one's runs were failed as it stopped, or as this one starts).
            shutil.rmtree(self.directory / APPEND_ONLY_DIR, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        config = [
            "bind 127.0.0.1",
            f"port {self.port}",
            f"requirepass {self._password}",
            f"dir {self.directory}",
            'save ""',
            # Started again after it was killed, it reloads the queue and the tasks' states
            # from its append-only file: the runs going go on, known; those queued stay queued.
            "appendonly yes",
            "appendfsync always",
            f"appenddirname {APPEND_ONLY_DIR}",
            "loglevel warning",
        ]
        # A session of its own: a terminal's Ctrl-C reaches the service, which stops it last.
        self.popen = subprocess.Popen(  # noqa: S603
            [server, "-"], stdin=subprocess.PIPE, start_new_session=True
        )
        assert self.popen.stdin is not None
        self.popen.stdin.write(("\n".join(config) + "\n").encode())
        self.popen.stdin.close()
        self._wait_ready()
        return self.popen

    def _wait_ready(self) -> None:
        assert self.popen is not None
        client = redis.Redis.from_url(self.url(0), socket_timeout=2)
        deadline = time.monotonic() + _BROKER_STARTUP_S
        try:
            while True:
                if self.popen.poll() is not None:
                    raise WorkerError(f"redis-server exited ({self.popen.returncode}) at start")
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise WorkerError(f"redis-server did not answer on port {self.port} in time")
                time.sleep(0.2)
        finally:
            client.close()


def worker_args(concurrency: int, index: int) -> Sequence[str]:
    """`whitebit-etl worker` as the service starts its ``index``-th worker."""
    return [
        sys.executable, "-m", "assets.cli", "worker",
        "--concurrency", str(concurrency), "--name", f"whitebit-{index}",
    ]  # fmt: skip
