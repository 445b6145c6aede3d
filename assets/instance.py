"""The Dagster instance the CLI's runs, `make ui` and the nightly service share, and the
recovery of runs whose process is gone.

Its home is the settings' ``DAGSTER_HOME``, else ``dagster`` in the warehouse's local directory;
its configuration is this package's ``dagster.yaml``, written there when the home has none. With
``DAGSTER_POSTGRES_URL`` set, the instance (the CLI's, the service's, a worker's alike) stores runs,
event logs and schedules in PostgreSQL, read from that variable, in a home of its own
(``dagster-postgres`` unless ``DAGSTER_HOME`` says), so a SQLite instance's history is never taken
for a PostgreSQL one. The instance is opened from its home (never through ``DAGSTER_HOME`` in
this process's environment); the processes the service starts get the home in theirs. With Celery
asked for (`whitebit-etl serve --workers N`, a Celery broker in ``CELERY_BROKER_URL``, `whitebit-etl
worker`), runs are launched as tasks of dagster-celery's ``CeleryRunLauncher``, its broker and
result backend read from `BROKER_ENV` and `BACKEND_ENV`: a worker on any machine that reaches the
broker, the database and the warehouse may run them (docs/many-machines.md).

A run executes in a process of its own (a CLI process, or a run worker of the service); nothing
outside it ends the run if that process is killed: the run would stay "started" and keep its slot
of the API pool (limit 1) forever, and every later run of an API asset would wait for that slot.
`release_dead_runs` marks such runs failed and frees their slots: a CLI run before it starts
another, `serve` as it starts. A run launched on Celery may run on another machine, where no pid
of this one means anything: Dagster's run monitoring judges it by its Celery task instead (the
daemon asks the result backend; see dagster.yaml).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import dagster as dg
import yaml

from warehouse.locks import file_lock
from warehouse.store import said_if_refused

from .dagster_private import InstanceRef
from .settings import Settings, SettingsError

POSTGRES_URL_ENV: Final = "DAGSTER_POSTGRES_URL"
#: Lock file in DAGSTER_HOME under which processes open the instance.
INSTANCE_LOCK: Final = ".whitebit-etl.lock"
#: Tag of every CLI run: ``<host>:<pid>`` of the process executing it.
RUNNER_TAG: Final = "whitebit-etl/runner"
#: Celery's own variables (Celery reads them itself in a worker): the broker's URL, and the
#: result backend's (the broker's when unset). They hold a password: never written in a file.
BROKER_ENV: Final = "CELERY_BROKER_URL"
BACKEND_ENV: Final = "CELERY_RESULT_BACKEND"
#: The run launcher of an instance whose runs go to Celery workers (dagster-celery's), and the
#: tag it puts on each run it launched (`dagster_celery.tags.DAGSTER_CELERY_TASK_ID_TAG`).
CELERY_LAUNCHER: Final = {"module": "dagster_celery.launcher", "class": "CeleryRunLauncher"}
CELERY_TASK_TAG: Final = "dagster-celery/task_id"
#: The first line of a dagster.yaml this package wrote (it may rewrite it; an operator's, never).
WRITTEN_HEADER: Final = "# Written by whitebit-etl (see assets/dagster.yaml)."
_UNFINISHED: Final = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


class InstanceError(SettingsError):
    """The instance cannot be used as configured; the message says what to change (in one line,
    as every setting that cannot be used)."""


def instance_config(*, postgres: bool, celery: bool = False) -> dict[str, Any]:
    """The instance's configuration (this package's ``dagster.yaml``), with PostgreSQL storage
    read from `POSTGRES_URL_ENV` when asked, and with runs launched on Celery workers, the broker
    and the result backend read from `BROKER_ENV` and `BACKEND_ENV`, when asked."""
    text = resources.files("assets").joinpath("dagster.yaml").read_text(encoding="utf-8")
    config: dict[str, Any] = yaml.safe_load(text)
    if postgres:
        config["storage"] = {"postgres": {"postgres_url": {"env": POSTGRES_URL_ENV}}}
    if celery:
        config["run_launcher"] = {
            **CELERY_LAUNCHER,
            "config": {"broker": {"env": BROKER_ENV}, "backend": {"env": BACKEND_ENV}},
        }
    return config


def _loaded(config: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    return loaded


def _uses_postgres(config: dict[str, Any]) -> bool:
    return bool("postgres" in (config.get("storage") or {}))


def _uses_celery(config: dict[str, Any]) -> bool:
    launcher = config.get("run_launcher") or {}
    return all(launcher.get(key) == value for key, value in CELERY_LAUNCHER.items())


def _write(config: Path, *, postgres: bool, celery: bool) -> None:
    # Whole or not at all: another process may be reading it already.
    temp = config.with_name(f".{config.name}.{os.getpid()}.tmp")
    text = yaml.safe_dump(instance_config(postgres=postgres, celery=celery), sort_keys=False)
    with said_if_refused(str(config)):
        temp.write_text(f"{WRITTEN_HEADER}\n{text}", encoding="utf-8")
        os.replace(temp, config)


def _home(home: Path, *, postgres: bool, celery: bool | None = None) -> Path:
    """``home``, created with its dagster.yaml. A dagster.yaml this package wrote is written
    again when this version would write another: asked for the other run launcher (``celery``:
    dagster-celery's, or the default; None: whichever it has; the launcher holds no history), or
    written by a version with other settings (the run monitoring's limits). An operator's own
    file is left as
    it is, and refused when it has the other launcher, saying what to change. A home that
    cannot be written is said in one line (`said_if_refused`)."""
    with said_if_refused(str(home)):
        home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        _write(config, postgres=postgres, celery=bool(celery))
    else:
        text = config.read_text(encoding="utf-8")
        loaded: dict[str, Any] = yaml.safe_load(text) or {}
        launcher = _uses_celery(loaded) if celery is None else celery
        if text.startswith(WRITTEN_HEADER):
            storage = _uses_postgres(loaded)
            if loaded != instance_config(postgres=storage, celery=launcher):
                _write(config, postgres=storage, celery=launcher)
        elif launcher != _uses_celery(loaded):
            change = (
                "set its run_launcher as deploy/celery/dagster.yaml does"
                if launcher
                else f"remove its run_launcher section, or set {BROKER_ENV}"
            )
            raise InstanceError(f"{config} was not written by whitebit-etl: {change}")
    return home


def instance_home(settings: Settings, *, celery: bool | None = None) -> tuple[Path, str]:
    """The instance home, made ready for the storage the settings ask for and for the run
    launcher asked for (``celery``: dagster-celery's; None: whichever the home has); and the
    storage's name."""
    local = settings.warehouse().local_dir
    url = settings.postgres_url.get_secret_value() if settings.postgres_url else None
    if not url:
        home = _home(settings.dagster_home or local / "dagster", postgres=False, celery=celery)
        if _uses_postgres(_loaded(home / "dagster.yaml")):
            raise InstanceError(
                f"{home}/dagster.yaml stores the instance in PostgreSQL: set {POSTGRES_URL_ENV}"
            )
        return home, "SQLite"
    home = _home(settings.dagster_home or local / "dagster-postgres", postgres=True, celery=celery)
    if not _uses_postgres(_loaded(home / "dagster.yaml")):
        raise InstanceError(
            f"{home / 'dagster.yaml'} stores the instance in SQLite under {home}: give the "
            f"PostgreSQL instance a DAGSTER_HOME of its own (or unset {POSTGRES_URL_ENV})"
        )
    return home, "PostgreSQL"


#: The compute log manager of the command line's runs: none. Their steps' output is the
#: terminal's, and Dagster's local one tails each step's output in processes of its own, which a
#: Ctrl-C to the terminal's process group would end with tracebacks.
NO_COMPUTE_LOGS: Final = {
    "module": "dagster._core.storage.noop_compute_log_manager",
    "class": "NoOpComputeLogManager",
}


def instance(
    settings: Settings,
    *,
    celery: bool | None = None,
    broker: Broker | None = None,
    command_line: bool = False,
) -> dg.DagsterInstance:
    """The persistent instance of the settings (with ``broker``: its runs launched to that Celery
    broker, whose URLs are given in memory, never written nor put in this process's
    environment; for the ``command_line``'s runs: without compute logs). Two processes starting
    at once on a new home would both create its storage, and one would fail on the other's
    half-made schema: they take turns opening it. A home that cannot be written is said in one
    line (`said_if_refused`)."""
    home, storage = instance_home(settings, celery=celery)
    if storage == "PostgreSQL":
        _answers(settings)
    overrides: dict[str, Any] = {}
    if broker is not None:
        config = {"broker": broker.url, "backend": broker.backend}
        overrides["run_launcher"] = {**CELERY_LAUNCHER, "config": config}
    if command_line:
        overrides["compute_logs"] = NO_COMPUTE_LOGS
    with said_if_refused(str(home)), file_lock(str(home / INSTANCE_LOCK)):
        if not overrides:
            return dg.DagsterInstance.from_config(str(home))
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))


def _answers(settings: Settings) -> None:
    """The settings' PostgreSQL takes one connection, or `InstanceError` in one line: where, and
    its driver's reason, never the URL's password. (Dagster's own connection tries six times over
    seconds, a warning each, then ends in three tracebacks.)"""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    assert settings.postgres_url is not None
    try:
        url = sqlalchemy.engine.make_url(settings.postgres_url.get_secret_value())
    except (sqlalchemy.exc.ArgumentError, ValueError):
        raise InstanceError(
            f"{POSTGRES_URL_ENV}: not a URL SQLAlchemy can read (not shown: it holds a password)"
        ) from None
    engine = sqlalchemy.create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 10})
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.SQLAlchemyError as exc:
        lines = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        reason = lines[0].replace(url.password, "***") if url.password else lines[0]
        raise InstanceError(
            f"{POSTGRES_URL_ENV}: the PostgreSQL at {url.host}:{url.port or 5432} cannot be "
            f"reached ({reason}): is it up, and is the URL right?"
        ) from None
    finally:
        engine.dispose()


@dataclass(frozen=True, slots=True)
class Broker:
    """A Celery broker's URL and its result backend's (both hold a password)."""

    url: str
    backend: str

    @classmethod
    def of(cls, settings: Settings) -> Broker | None:
        """The settings' broker (its backend the broker's, unless the settings name one)."""
        if settings.broker_url is None:
            return None
        url = settings.broker_url.get_secret_value()
        backend = settings.result_backend.get_secret_value() if settings.result_backend else url
        return cls(url, backend)

    def env(self) -> dict[str, str]:
        """The variables Celery and the instance read them from, for a child process."""
        return {BROKER_ENV: self.url, BACKEND_ENV: self.backend}


def runner_tag() -> dict[str, str]:
    """The tag that ties a CLI run to this process."""
    return {RUNNER_TAG: f"{socket.gethostname()}:{os.getpid()}"}


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def _dead(instance: dg.DagsterInstance, run: dg.DagsterRun, *, service_stopped: bool) -> str:
    """Whose process ``run`` lost (a CLI process, the service's run worker), or "" when it may
    still run."""
    if RUNNER_TAG in run.tags:
        where, _, pid = run.tags[RUNNER_TAG].rpartition(":")
        if where != socket.gethostname() or not pid.isdigit() or process_alive(int(pid)):
            return ""
        return f"whitebit-etl process {pid}"
    if not service_stopped or run.status == dg.DagsterRunStatus.NOT_STARTED:
        return ""
    if CELERY_TASK_TAG in run.tags:
        # Its worker may be on another machine, alive: run monitoring asks Celery about it.
        return ""
    started = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_START)
    pids = [e.dagster_event.pid for e in started if e.dagster_event and e.dagster_event.pid]
    return "" if pids and process_alive(pids[-1]) else "the service"


def release_dead_runs(instance: dg.DagsterInstance, *, service_stopped: bool) -> list[str]:
    """Mark failed each unfinished run whose process is gone, and free the API pool slot it
    holds; their ids. A CLI run is judged by its process (`RUNNER_TAG`, this host only); a
    service run by its run worker, only when the service is known to be stopped
    (``service_stopped``: `serve` starting), since a worker may be starting it; never a run
    launched on Celery (`CELERY_TASK_TAG`: its worker may be another machine's, so Dagster's run
    monitoring judges it by its task). A reused pid keeps a run as it is: the safe side."""
    released = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=_UNFINISHED)):
        who = _dead(instance, run, service_stopped=service_stopped)
        if not who:
            continue
        instance.report_run_failed(
            run,
            message=f"{who} ended before this run did (it was killed); marked failed, which "
            "freed the run's API pool slot",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def free_slots_of_ended_runs(instance: dg.DagsterInstance, pools: Sequence[str]) -> list[str]:
    """Free every slot of these pools that a run which has ended (or is gone) still holds: a run
    whose instance could not be reached at its end (a database outage) keeps its slot, and every
    later run of its pool would wait for it. The runs' ids."""
    freed = []
    for pool in pools:
        info = instance.event_log_storage.get_concurrency_info(pool)
        holders = {slot.run_id for slot in info.claimed_slots}
        holders |= {step.run_id for step in info.pending_steps}
        for run_id in sorted(holders):
            run = instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                instance.event_log_storage.free_concurrency_slots_for_run(run_id)
                freed.append(run_id)
    return freed


def slot_holders(instance: dg.DagsterInstance, pool: str) -> list[str]:
    """Who holds the pool's slots, one line each: the run, its status, and where it runs."""
    held = []
    for slot in instance.event_log_storage.get_concurrency_info(pool).claimed_slots:
        run = instance.get_run_by_id(slot.run_id)
        if run is None:
            held.append(f"run {slot.run_id} (gone from the instance)")
            continue
        where = run.tags.get(RUNNER_TAG)
        held.append(
            f"run {run.run_id} ({run.status.value}"
            + (f", whitebit-etl process {where}" if where else "")
            + ")"
        )
    return held
