"""The nightly service as production runs it: a code location server, the daemon (schedules,
sensors, the run queue) and the webserver, started and stopped together by ``whitebit-etl serve``.

Its instance is the CLI's (`assets.instance.instance_home`: SQLite, or PostgreSQL when
``DAGSTER_POSTGRES_URL`` is set); the processes it starts find it through ``DAGSTER_HOME`` in the
environment the service builds for them.

With ``--workers N`` (N > 0), or a Celery broker in ``CELERY_BROKER_URL``, runs are launched on
Celery workers (`assets.workers`): the service starts N of them beside its other processes, and,
unless ``CELERY_BROKER_URL`` names a broker, Debian's redis-server on a loopback port as their
broker and result backend (its URLs go to the processes' environment, never to a file). Workers
on other machines that reach the same broker, database and warehouse take runs too
(docs/many-machines.md).

On SIGTERM or SIGINT the runs in progress are terminated and marked canceled with that reason
(queued runs stay queued for the next start), then the processes are stopped, each given a few
seconds before SIGKILL. Schedules, run history and partitions live in the instance's storage, so
a restart finds them all; a tick the daemon was evaluating is resumed, not repeated; runs a killed
service left are marked failed as it starts again (`assets.instance.release_dead_runs`).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import dagster as dg
import psutil
from rich.console import Console

from assets.instance import (
    BROKER_ENV,
    RUNNER_TAG,
    Broker,
    InstanceError,
    instance,
    instance_home,
    release_dead_runs,
)
from assets.relay import relay
from assets.settings import Settings
from assets.workers import LocalBroker, slots_per_worker, tool, worker_args

#: The code location's name: the one `make ui` gives it, so both see the same schedule state.
LOCATION: Final = "assets.definitions"
WORKSPACE_FILE: Final = "workspace.yaml"
#: How long a process (or a terminated run) is given to end before it is killed.
STOP_GRACE_S: Final = 5.0
#: A process of the service that exits is started again (the Celery broker killed, a worker
#: that lost it), at most this many times in `RESTART_WINDOW_S`; past that the service stops.
RESTARTS: Final = 5
RESTART_WINDOW_S: Final = 600.0
_STARTUP_S: Final = 180.0


class ServiceError(InstanceError):
    """The service cannot start as configured; the message says what to change."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _workspace(home: Path, port: int) -> Path:
    path = home / WORKSPACE_FILE
    path.write_text(
        "# Written by whitebit-etl serve: the code location server it started.\n"
        "load_from:\n"
        "  - grpc_server:\n"
        "      host: 127.0.0.1\n"
        f"      port: {port}\n"
        f"      location_name: {LOCATION}\n",
        encoding="utf-8",
    )
    return path


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class _Process:
    """A process of the service, and how to start it again when it exits."""

    name: str
    popen: subprocess.Popen[bytes]
    restart: Callable[[], subprocess.Popen[bytes]] | None = None
    #: When it was started again, for the budget of `RESTARTS`.
    restarts: list[float] = field(default_factory=list)

    def revived(self) -> bool:
        """Start it again after it exited, unless it has used up its restarts; whether it was."""
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW_S]
        if self.restart is None or len(self.restarts) >= RESTARTS:
            return False
        self.restarts.append(now)
        self.popen = self.restart()
        return True


def _signal_all(processes: Sequence[_Process]) -> None:
    """SIGTERM to each still running."""
    for process in processes:
        if process.popen.poll() is None:
            process.popen.terminate()


def _stop_all(processes: Sequence[_Process]) -> None:
    """SIGTERM to each, then SIGKILL to those still running after the grace period."""
    _signal_all(processes)
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        try:
            process.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.popen.kill()
            process.popen.wait()


def left_after(processes: Sequence[psutil.Process], seconds: float) -> list[psutil.Process]:
    """Those of ``processes`` still running after up to ``seconds``: a zombie (an orphan its
    new parent has not reaped yet) has ended (`psutil` tells a process from a later one given
    the same pid)."""
    deadline = time.monotonic() + seconds
    while True:
        left = []
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(process)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def kill_left(started: Sequence[psutil.Process], grace: float = 0.0) -> None:
    """SIGKILL what is left of the service (or of `dagster dev`) after ``grace`` seconds more:
    nothing it started outlives it."""
    for process in left_after(started, grace):
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    left_after(started, STOP_GRACE_S)


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal_name = signal.Signals(signum).name


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def _start(name: str, args: Sequence[str], env: dict[str, str], logs: Path) -> _Process:
    """A process of the service, in a session of its own: a terminal's Ctrl-C (SIGINT to its
    whole process group) reaches the service alone, which stops its runs and then its
    processes in order, instead of each process and run worker taking it as a crash. What it
    prints is relayed, stack traces folded (whole in ``logs``: `relay`)."""

    def launch() -> subprocess.Popen[bytes]:
        popen = subprocess.Popen(  # noqa: S603
            list(args),
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert popen.stdout is not None
        relay(popen.stdout, logs / f"{name.replace(' ', '-')}.log")
        return popen

    return _Process(name, launch(), restart=launch)


def _wait_for_code_server(process: _Process, port: int) -> None:
    deadline = time.monotonic() + _STARTUP_S
    while not _listening(port):
        if process.popen.poll() is not None:
            raise ServiceError("the code location server exited while loading the definitions")
        if time.monotonic() > deadline:
            raise ServiceError(f"the code location server did not listen on port {port} in time")
        time.sleep(0.5)


def _unfinished_service_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """Runs started and not ended, but a CLI process's (those are its own)."""
    unfinished = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=unfinished))
    return [run for run in runs if RUNNER_TAG not in run.tags]


def mark_left_canceled(opened: dg.DagsterInstance, reason: str) -> list[str]:
    """Once the service's processes are gone: mark canceled, with ``reason``, each run still
    unfinished (one launched while the service stopped); their ids."""
    left = _unfinished_service_runs(opened)
    for run in left:
        opened.report_run_canceled(run, message=reason)
        opened.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return [run.run_id for run in left]


def cancel_runs_in_progress(
    instance: dg.DagsterInstance, reason: str, meanwhile: Callable[[], None] = lambda: None
) -> list[str]:
    """Terminate the service's runs in progress and mark those that have not ended within the
    grace period canceled with ``reason``; their ids. (A CLI process's runs are its own.)

    A run still starting (its worker launched, not yet running it) is marked canceled at once:
    a worker that finds its run canceled does not start it, where one that finds it "canceling"
    takes itself for a duplicate and exits, and its run is then failed for the exit. Once each
    run is asked to stop, ``meanwhile`` runs (the service's processes are told to stop while
    the runs end)."""
    running = _unfinished_service_runs(instance)
    for run in running:
        if run.status == dg.DagsterRunStatus.STARTING:
            instance.report_run_canceled(run, message=reason)
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            continue
        try:
            instance.run_launcher.terminate(run.run_id)
        except Exception:  # noqa: S112 - the run is marked below whatever the launcher did
            continue
    meanwhile()
    deadline = time.monotonic() + STOP_GRACE_S
    pending = {run.run_id for run in running}
    while pending and time.monotonic() < deadline:
        time.sleep(0.5)
        pending = {
            run_id
            for run_id in pending
            if (found := instance.get_run_by_id(run_id)) is not None and not found.is_finished
        }
    for run_id in pending:
        left = instance.get_run_by_id(run_id)
        if left is not None and not left.is_finished:
            instance.report_run_canceled(left, message=reason)
    return [run.run_id for run in running]


def _celery_broker(settings: Settings, home: Path) -> tuple[Broker, LocalBroker | None, str]:
    """The broker of a service whose runs go to Celery: the one the settings name, else one the
    service starts (with workers of its own only); and what the banner says of it (never its
    URL: it holds a password)."""
    named = Broker.of(settings)
    if named is not None:
        return named, None, f"broker from {BROKER_ENV}"
    local = LocalBroker(free_port(), home / "redis")
    return (
        Broker(local.url(0), local.url(1)),
        local,
        f"broker redis-server on 127.0.0.1:{local.port}",
    )


def serve(console: Console, settings: Settings, host: str, port: int, workers: int = 0) -> None:
    """Start the code location server, the daemon and the webserver, and with ``workers`` that
    many Celery workers (and their broker, unless the settings name one); stop them on SIGTERM
    or SIGINT (or when one of them exits)."""
    celery = workers > 0 or settings.broker_url is not None
    home, storage = instance_home(settings, celery=celery)
    broker: Broker | None = None
    local_broker: LocalBroker | None = None
    said = ""
    if celery:
        broker, local_broker, said = _celery_broker(settings, home)
    # The service's processes find the instance, and the broker, in their environment.
    env = settings.child_env({"DAGSTER_HOME": str(home), **(broker.env() if broker else {})})
    opened = instance(settings, celery=celery, broker=broker)
    for run_id in release_dead_runs(opened, service_stopped=True):
        console.print(f"run {run_id} was left unfinished by a killed process: marked failed")
    code_port = free_port()
    workspace = _workspace(home, code_port)
    logs = home / "logs"
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    processes: list[_Process] = []
    brokers: list[_Process] = []
    reason = "one of the service's processes exited"
    try:
        if local_broker is not None:
            brokers.append(
                _Process(
                    "Celery broker (redis-server)", local_broker.start(), restart=local_broker.start
                )
            )
        code = _start(
            "code location server",
            [tool("dagster"), "api", "grpc", "-m", LOCATION, "-h", "127.0.0.1",
             "-p", str(code_port)],
            env, logs,
        )  # fmt: skip
        processes.append(code)
        _wait_for_code_server(code, code_port)
        processes.append(
            _start("daemon", [tool("dagster-daemon"), "run", "-w", str(workspace)], env, logs)
        )
        processes.append(
            _start(
                "webserver",
                [tool("dagster-webserver"), "-w", str(workspace), "-h", host, "-p", str(port)],
                env,
                logs,
            )
        )
        slots = slots_per_worker(home, workers) if workers else 0
        processes += [
            _start(f"Celery worker {index}", worker_args(slots, index), env, logs)
            for index in range(1, workers + 1)
        ]
        on_celery = ""
        if celery:
            on_celery = (
                f"; runs on Celery workers ({workers} here, {slots} run(s) at once each; {said})"
                if workers
                else f"; runs on Celery workers elsewhere ({said})"
            )
        console.print(
            f"whitebit-etl serve: webserver on http://{host}:{port}, daemon, code location server "
            f"on port {code_port}; instance {home} ({storage}){on_celery}. SIGTERM or Ctrl-C "
            "stops it."
        )
        watched = brokers + processes
        while True:
            time.sleep(1)
            for gone in [p for p in watched if p.popen.poll() is not None]:
                status = gone.popen.returncode
                if not gone.revived():
                    reason = f"the {gone.name} exited ({status}) {RESTARTS} times in 10 minutes"
                    raise ServiceError(f"{reason}: the service stops")
                console.print(
                    f"the {gone.name} exited ({status}): started again (runs it cut off are "
                    "failed by run monitoring and tried again by run retries)"
                )
    except _Stop as stop:
        reason = f"whitebit-etl serve stopped on {stop.signal_name} before this run ended"
    finally:
        # No second signal may cut the stopping short; the runs go first, while their code
        # location server (or their Celery broker) is still there to terminate them.
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        # Every process the service started, run workers (Celery's pool processes) and log
        # helpers included, taken before the stop: once their parent ends they are no longer
        # its children.
        started = psutil.Process().children(recursive=True)
        try:
            if processes:
                # The daemon, the webserver and the workers are told to stop as soon as the
                # runs are: they stop while the runs end (the code location server, which the
                # runs' termination goes through, stays until they have).
                canceled = cancel_runs_in_progress(
                    opened, reason, lambda: _signal_all(processes[1:])
                )
                if canceled:
                    console.print(f"runs canceled: {', '.join(canceled)}")
        finally:
            started += psutil.Process().children(recursive=True)  # any launched meanwhile
            # The code location server (the first started) last: the daemon and the webserver
            # ask it until they stop.
            _stop_all(processes[1:])
            _stop_all(processes[:1])
            _stop_all(brokers)  # after the workers, which talk to it as they stop
            kill_left(started)
            if processes:
                canceled = mark_left_canceled(opened, reason)
                if canceled:
                    console.print(f"runs canceled as the service stopped: {', '.join(canceled)}")
            opened.dispose()
            for s, handler in previous.items():
                signal.signal(s, handler)
    console.print("whitebit-etl serve: stopped")
