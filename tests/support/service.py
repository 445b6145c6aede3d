"""The nightly service in processes of its own, a webhook receiver standing in for Slack, and
their settings."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import dagster as dg
import httpx
import psutil
import pytest

from assets.service import STOP_GRACE_S, free_port, left_after
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import REPO

T = TypeVar("T")

#: Starting the service's processes (Celery workers among them) on a machine busy with other
#: test processes.
START_TIMEOUT_S = 300
#: One request to a service still starting (its webserver's first answers are slow).
REQUEST_TIMEOUT_S = 10
#: How long a SIGTERM may take to end the service: its four grace periods (the runs, its
#: processes, its broker, what they left) and the instance's writes on a loaded machine.
STOP_BOUND_S = 4 * STOP_GRACE_S + 20


@dataclass
class Received:
    at: float
    text: str


@dataclass
class Webhook:
    """A loopback HTTP receiver standing in for Slack's incoming webhook."""

    url: str
    received: list[Received] = field(default_factory=list)


@contextmanager
def webhook_receiver() -> Iterator[Webhook]:
    hook = Webhook(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hook.received.append(Received(time.time(), json.loads(body)["text"]))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T000/B000/s3cr3t-path"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hook
    server.shutdown()
    server.server_close()


def serves(url: str) -> bool:
    """Whether the Dagster webserver at ``url`` answers (one that is starting answers slowly)."""
    try:
        return httpx.get(url + "/server_info", timeout=REQUEST_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


@dataclass
class Service:
    """``whitebit-etl serve`` in a process group of its own; output to ``<log>-N.log``."""

    env: dict[str, str]
    log: Path
    #: More of ``serve``'s options (``--workers 2``).
    args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    #: Every process the service was seen to have started (`children`).
    started: list[psutil.Process] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> str:
        return self.env["DAGSTER_HOME"]

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        self.starts += 1
        self.started = []
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.with_name(f"{self.log.name}-{self.starts}.log").open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "assets.cli", "serve", "--port", str(self.port), *self.args],
                cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while not serves(self.url):
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, "the service did not start:\n" + self.output()
            time.sleep(1)

    def output(self) -> str:
        return "".join(
            p.read_text(errors="replace")
            for p in sorted(self.log.parent.glob(f"{self.log.name}-*"))
        )

    def children(self) -> list[psutil.Process]:
        """The service's processes now (each in a session of its own, with theirs), remembered:
        they are the service's still once it has ended and they are no longer its children."""
        assert self.process is not None
        with contextlib.suppress(psutil.NoSuchProcess):
            self.started += psutil.Process(self.process.pid).children(recursive=True)
        return self.started

    def group_alive(self) -> bool:
        """Whether the service's command, or any process it started, still runs."""
        assert self.process is not None
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return bool(left_after(self.children(), 0))
        return True

    def group_ends(self, within: float = 10) -> bool:
        """Whether every process of the service has ended within ``within`` seconds (Dagster's
        log helpers notice their parent is gone on their own next poll)."""
        deadline = time.monotonic() + within
        while self.group_alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        """SIGKILL every process of the service at once."""
        assert self.process is not None
        started = self.children()
        os.killpg(self.process.pid, signal.SIGKILL)
        for process in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        self.process.wait()
        self.group_ends(30)

    def terminate(self) -> tuple[int, float]:
        """SIGTERM to the service's command alone, as a service manager sends it: its exit
        code and how long it took to end."""
        assert self.process is not None
        self.children()
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        return code, time.monotonic() - started

    def assert_stops_cleanly(self) -> None:
        """SIGTERM ends the service in time (`STOP_BOUND_S`) with status 0, every process of its
        group with it, and no run of its instance is left starting or started."""
        code, seconds = self.terminate()
        assert code == 0, self.output()[-3000:]
        assert seconds < STOP_BOUND_S, (seconds, self.output()[-3000:])
        assert self.group_ends()
        assert "whitebit-etl serve: stopped" in self.output()
        with self.instance() as instance:
            left = instance.get_runs(
                filters=dg.RunsFilter(
                    statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
                )
            )
        assert left == []

    def stop(self) -> None:
        if self.process is not None and self.group_alive():
            self.kill()

    @contextmanager
    def instance(self) -> Iterator[dg.DagsterInstance]:
        """The service's instance, opened as its processes open it (its URL from the
        environment)."""
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DAGSTER_POSTGRES_URL", self.env["DAGSTER_POSTGRES_URL"])
            with dg.DagsterInstance.from_config(self.home) as instance:
                yield instance


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, service: Service) -> T:
    """The first answer of ``probe`` that is not empty, asked every second while the service
    runs: fails, with what the service printed, if it exits or ``what`` takes over ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        assert service.process is not None
        assert service.process.poll() is None, service.output()
        assert time.monotonic() < deadline, (
            f"{what}: not in {timeout:.0f} s\n{service.output()[-6000:]}"
        )
        time.sleep(1)


def service_env(
    exchange: SpawnedSimulator,
    base: Path,
    postgres_url: str,
    webhook: Webhook,
    *,
    secret: str | None = None,
) -> dict[str, str]:
    """What an operator sets: the account (its funding and main balances: the service's own
    machinery is under test, not the histories), the warehouse, the instance's database, the
    alert webhook and the UI's address; and a schedule that fires every minute."""
    from tests.support.cli_runs import cli_env

    env = cli_env(
        exchange,
        base / "warehouse",
        base / "dagster",
        histories=("funding_history", "main_balances"),
    )
    if secret is not None:
        env["WHITEBIT_API_SECRET"] = secret
    return env | {
        "DAGSTER_POSTGRES_URL": postgres_url,
        "WHITEBIT_NIGHTLY_CRON": "* * * * *",
        "WHITEBIT_ALERT_WEBHOOK_URL": webhook.url,
        "WHITEBIT_UI_URL": "http://dagster.example.test:3000/",
    }
