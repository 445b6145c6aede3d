"""``serve``, ``worker`` and ``ui``: the nightly service, a Celery worker of its runs, and the
Dagster UI over the instance the command line uses."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import click
import psutil

from ._common import console, settings


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The webserver's address.")
@click.option("--port", default=3000, show_default=True, help="The webserver's port.")
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Celery workers to start beside the service (0: runs are launched the default way, "
    "or to the workers of CELERY_BROKER_URL when it is set).",
)
def serve(host: str, port: int, workers: int) -> None:
    """Run the nightly service: the webserver, the daemon and the code location server.

    SQLite instance by default; PostgreSQL when DAGSTER_POSTGRES_URL is set. With --workers N,
    runs go to N Celery workers, their broker Debian's redis-server on a loopback port unless
    CELERY_BROKER_URL names one. Failed runs are posted to WHITEBIT_ALERT_WEBHOOK_URL when set.
    Stops cleanly on SIGTERM or Ctrl-C, its workers and broker with it.
    """
    from assets.instance import InstanceError
    from assets.service import serve as run_service

    try:
        run_service(console(), settings(), host, port, workers)
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from None


@click.command()
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Runs this worker executes at once, each in a process of its own.",
)
@click.option(
    "--name",
    default="whitebit",
    show_default=True,
    help="The worker's name; Celery adds @<host>.",
)
def worker(concurrency: int, name: str) -> None:
    """Run a Celery worker of the nightly service's runs, on this machine or another.

    It takes the runs the service launches to the broker of CELERY_BROKER_URL (results to
    CELERY_RESULT_BACKEND, by default the same), and executes them against the instance of
    DAGSTER_POSTGRES_URL and the warehouse of WAREHOUSE_ROOT, with the accounts' variables: see
    docs/many-machines.md. Stops on SIGTERM once its runs have ended (a second one, at once).
    """
    from assets.instance import InstanceError
    from assets.workers import run_worker

    try:
        run_worker(console(), settings(), concurrency, name)
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from None


@click.command()
@click.option("--port", default=3000, show_default=True, help="The UI's port.")
def ui(port: int) -> None:
    """Open the Dagster UI (``dagster dev``) over the instance the command line's runs use, with
    the code location workspace.yaml names. SIGTERM or Ctrl-C stops it, its webserver, daemon
    and code servers with it."""
    from assets.instance import instance_home
    from assets.relay import relay
    from assets.service import STOP_GRACE_S, kill_left
    from assets.workers import tool

    home, _ = instance_home(settings())
    env = settings().child_env({"DAGSTER_HOME": str(home)})
    command = [tool("dagster"), "dev", "-w", "workspace.yaml", "-p", str(port)]
    # A session of its own: a terminal's Ctrl-C reaches this process alone, which asks dagster
    # dev to stop (SIGTERM: it stops its webserver and daemon in turn); killed after the grace,
    # with whatever it started. What it prints is relayed, stack traces folded (whole in the
    # log: `relay`), to its last line.
    dev = psutil.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    relayed = relay(dev.stdout, home / "logs" / "dagster-dev.log")

    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = dev.wait()
    except _Stopped as stopped:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        dev.terminate()
        kill_left(_tree_while_it_stops(dev, STOP_GRACE_S))
        code = 128 + stopped.signum
    relayed.join(timeout=2)
    sys.exit(code)


def _tree_while_it_stops(root: psutil.Popen, grace: float) -> list[psutil.Process]:
    """``root`` and every process under it seen until it ends or ``grace`` seconds pass: a run
    its daemon launched as the stop came is one of them (once ``root`` ends, what it left is no
    longer its children)."""
    seen = {root.pid: psutil.Process(root.pid)}
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.NoSuchProcess):
            seen |= {p.pid: p for p in root.children(recursive=True)}
        with contextlib.suppress(psutil.TimeoutExpired):
            root.wait(timeout=0.1)
            break
    return list(seen.values())


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
