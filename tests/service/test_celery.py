"""The nightly service with its runs on Celery workers, on one machine as on many: `whitebit-etl
serve --workers 2` starts Debian's redis-server (broker and result backend) and two Celery
workers beside its daemon, webserver and code location server; its instance is on PostgreSQL,
the warehouse on S3 (moto's server), two accounts in an accounts file.

- The schedule's tick (every minute here) launches each account's two runs; they run in the
  workers' pool processes, side by side, and what lands on S3 is, account by account, what the
  same account extracted alone on local disk holds.
- The broker lost in the middle of that night (the redis-server the service started, SIGKILLed
  while the runs go): the service keeps running, starts its Redis again (same port, same
  password, its append-only file reloaded) and the workers reconnect; the runs going go on,
  their tasks known to the Redis started again, and every run of the night is a success, none
  failed nor tried again. What docs/many-machines.md says of a broker lost is what this sees.
- A worker SIGKILLed mid-write (a third worker, armed to die halfway through a month's Parquet
  file, with the run's process): Celery says WorkerLostError and fails the task, the daemon's run
  monitoring sees the task failed and fails the run; the warehouse keeps the month's old object,
  whole; the account's API pool slot is freed, the dead writer's lease taken over, and a rerun
  gives the same warehouse.
- SIGTERM stops the service, its workers and their pool processes, and redis: nothing outlives it.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import httpx
import psutil
import pytest
import yaml
from dagster_celery.tags import DAGSTER_CELERY_QUEUE_TAG
from dagster_graphql import DagsterGraphQLClient

from assets.accounts import load
from assets.dagster_private import InstigatorTick, InstigatorType
from assets.definitions import location
from assets.instance import CELERY_TASK_TAG, instance_config
from assets.jobs import nightly_requests
from assets.settings import Settings
from assets.steps import ACCOUNT_TAG
from pipeline.simulator import SpawnedSimulator, spawn
from tests.support.cli_runs import (
    TWO_ACCOUNTS,
    Child,
    Rows,
    failures,
    two_accounts_env,
    warehouse_rows,
)
from tests.support.postgres import LocalPostgres
from tests.support.s3 import S3Server
from tests.support.service import Service, wait_for
from warehouse import Warehouse, archive, catalog, layout, partitions, report
from warehouse.schemas import month_of
from warehouse.sources import SOURCES_DIR

#: Long: the module's first test sets up a reference night, the service and its first night, on
#: a machine shared with other work.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

#: Account name to the simulator key it uses: the main account and a sub-account.
ACCOUNTS = TWO_ACCOUNTS
#: What each account extracts: a history and a snapshot (the workers, the broker and the store
#: are under test here, not the histories).
NIGHT = ("funding_history", "main_balances")
#: The first tick comes at the next minute; then four runs on two workers, the broker lost.
RUNS_TIMEOUT_S = 600  # on a busy machine
#: Run monitoring looks every `POLL_S` here (15 s as the package configures it); the killed
#: run's pool slot is freed `FREE_SLOTS_S` after its end, at a later look; the rerun, queued
#: until then, takes it.
POLL_S = 3
FREE_SLOTS_S = 2
RECOVERY_TIMEOUT_S = 180
KILLED = "sub_1"
#: Dagster's tag on a run retried, naming the run it retries.
PARENT_TAG = "dagster/parent_run_id"
#: The Celery queue only the killable worker takes runs from.
KILL_QUEUE = "killable"


class PoolProcesses:
    """The Celery worker of each of the service's pool processes, looked at every half second
    from the service's launch: a pool process lives from its worker's start (or its
    predecessor's end) until its one run ends, so the worker of every run is known however late
    the test reads the runs (it may be busy with the reference night while the first ones end)."""

    def __init__(self, service: Service) -> None:
        self.workers: dict[int, str] = {}
        self._service = service
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pool-processes", daemon=True)

    def __enter__(self) -> PoolProcesses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            process = self._service.process
            if process is None:
                continue
            try:
                descendants = psutil.Process(process.pid).children(recursive=True)
            except psutil.Error:
                continue
            for child in descendants:
                worker = _worker_of(child.pid)
                if worker is not None:
                    self.workers.setdefault(child.pid, worker)


@dataclass
class Night:
    service: Service
    pools: PoolProcesses
    base: Path
    root: str
    env: dict[str, str]
    store: S3Server
    exchange: SpawnedSimulator
    #: Each account extracted alone on local disk, for the night of `alone_tick`.
    alone: dict[str, Rows]
    alone_tick: datetime

    @property
    def bucket(self) -> str:
        return self.root.removeprefix("s3://").split("/")[0]


@pytest.fixture(scope="module")
def still_exchange() -> Iterator[SpawnedSimulator]:
    """The service tests' exchange (the same seed and accounts) with its clock stopped as the
    module starts: each account's night alone and the night on the workers, minutes apart, read
    the same answers (on a running clock a fill, a deposit's next status or the balance it
    moves may land between them)."""
    with spawn(seed=7, scale="small", frozen_at=time.time()) as sim:
        yield sim


@pytest.fixture(scope="module")
def night(
    postgres: LocalPostgres,
    still_exchange: SpawnedSimulator,
    s3_server: S3Server,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Night]:
    """The service with two workers of its own, on PostgreSQL and S3, two accounts, run
    monitoring looking every `POLL_S`; this process's AWS variables pointing at the S3 server
    too (its catalog of the bucket is read here), and the bucket mirrored under the module's
    directory at the end (the secrets scan reads it there)."""
    base = tmp_path_factory.mktemp("celery")
    bucket = s3_server.bucket()
    root = f"s3://{bucket}/warehouse"
    env = two_accounts_env(
        still_exchange,
        root,
        base / "dagster",
        base / "accounts.yaml",
        ACCOUNTS,
        histories=NIGHT,
    )
    env = {k: v for k, v in env.items() if not k.startswith(("AWS_", "CELERY_"))}
    env |= s3_server.env | {
        "DAGSTER_POSTGRES_URL": postgres.url(postgres.new_database()),
        "WHITEBIT_NIGHTLY_CRON": "* * * * *",
        "XDG_STATE_HOME": str(base / "state"),
        # A lease a killed run held is taken over soon.
        "WAREHOUSE_LEASE_SECONDS": "5",
        # History from the month before this one: none the exchange forgets is at stake (from
        # further back the horizon check errs until the six months are backfilled).
        "WHITEBIT_START_DATE": _last_month_start().isoformat(),
    }
    env.pop("WAREHOUSE_CATALOG", None)
    _quick_monitoring(base / "dagster")
    service = Service(env, base / "logs" / "serve", args=["--workers", "2"])
    with pytest.MonkeyPatch.context() as patch:
        s3_server.point_here(patch)
        patch.setenv("XDG_STATE_HOME", str(base / "test-state"))
        patch.delenv("WAREHOUSE_CATALOG", raising=False)
        # The reference night first: while the service ran, each minute's tick would queue four
        # more runs, all to be ended before the bucket is read (on a busy machine, many).
        now = datetime.now(UTC)
        alone = _alone(env, now, base / "alone")
        try:
            service.launch()
            with PoolProcesses(service) as pools:
                service.wait_ready()
                yield Night(service, pools, base, root, env, s3_server, still_exchange, alone, now)
        finally:
            service.stop()
            still_exchange.control("faults", probability=0.0)
            s3_server.mirror(bucket, base / "s3-objects")


def _quick_monitoring(home: Path) -> None:
    """The home's dagster.yaml, an operator's own (so left as it is): the package's, for
    PostgreSQL and Celery, with run monitoring looking every `POLL_S` and freeing a dead run's
    slot `FREE_SLOTS_S` after its end."""
    config = instance_config(postgres=True, celery=True)
    config["run_monitoring"] |= {
        "poll_interval_seconds": POLL_S,
        "free_slots_after_run_end_seconds": FREE_SLOTS_S,
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _nightly_state(service: Service) -> tuple[str, str]:
    with service.instance() as instance:
        (state,) = [
            s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)
            if s.instigator_name == "nightly_schedule"
        ]
    return state.instigator_origin_id, state.selector_id


def _ticks(service: Service) -> list[InstigatorTick]:
    origin, selector = _nightly_state(service)
    with service.instance() as instance:
        return sorted(instance.get_ticks(origin, selector), key=lambda t: t.timestamp)


def _stop_schedule(service: Service) -> None:
    """Stop the nightly schedule, as its toggle in the UI does: no tick after this one."""
    origin, selector = _nightly_state(service)
    mutation = """
      mutation Stop($origin: String, $selector: String) {
        stopRunningSchedule(scheduleOriginId: $origin, scheduleSelectorId: $selector) {
          __typename
        }
      }"""
    answer = httpx.post(
        service.url + "/graphql",
        json={"query": mutation, "variables": {"origin": origin, "selector": selector}},
        timeout=30,
    ).json()
    assert answer["data"]["stopRunningSchedule"]["__typename"] == "ScheduleStateResult", answer


def _runs(service: Service, run_ids: list[str]) -> list[dg.RunRecord]:
    with service.instance() as instance:
        return list(instance.get_run_records(dg.RunsFilter(run_ids=run_ids)))


def _worker_of(pid: int) -> str | None:
    """The Celery worker whose pool process ``pid`` is (its ``-n`` name), if it runs."""
    try:
        parent = psutil.Process(pid).parent()
        command = parent.cmdline() if parent is not None else []
    except psutil.Error:
        return None
    if "celery" not in " ".join(command) or "-n" not in command:
        return None
    return command[command.index("-n") + 1]


def _run_pid(service: Service, run_id: str) -> int | None:
    with service.instance() as instance:
        started = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START)
    pids = [e.dagster_event.pid for e in started if e.dagster_event and e.dagster_event.pid]
    return pids[-1] if pids else None


def _redis(service: Service) -> psutil.Process | None:
    assert service.process is not None
    for process in psutil.Process(service.process.pid).children(recursive=True):
        if "redis-server" in _command(process):
            return process
    return None


@dataclass
class BrokerLost:
    """The runs going when the broker was SIGKILLed, and the Redis started again."""

    cut: list[dg.DagsterRun]
    killed: int
    again: int


def _lose_the_broker(service: Service, run_ids: list[str]) -> BrokerLost:
    """SIGKILL the service's redis-server once one of the runs has started; wait for the one
    the service starts again."""

    def going() -> list[dg.DagsterRun] | None:
        runs = [r.dagster_run for r in _runs(service, run_ids)]
        return [r for r in runs if r.status == dg.DagsterRunStatus.STARTED] or None

    cut = wait_for("the night's runs, going", going, RUNS_TIMEOUT_S, service)
    redis = _redis(service)
    assert redis is not None, service.output()[-3000:]
    os.kill(redis.pid, signal.SIGKILL)

    def restarted() -> psutil.Process | None:
        again = _redis(service)
        return again if again is not None and again.pid != redis.pid else None

    again = wait_for("Redis, started again", restarted, 60, service)
    return BrokerLost(cut, redis.pid, again.pid)


@dataclass
class FirstNight:
    tick: InstigatorTick
    runs: list[dg.RunRecord]
    workers: set[str]
    broker: BrokerLost


@pytest.fixture(scope="module")
def first_night(night: Night) -> FirstNight:
    """The first tick's four runs, ended, the broker lost while they went; the schedule stopped
    once they were launched. The workers whose pool processes ran them."""
    served = night.service
    runs_of_a_night = 2 * len(ACCOUNTS)

    def launched() -> InstigatorTick | None:
        return next((t for t in _ticks(served) if len(t.run_ids) == runs_of_a_night), None)

    tick = wait_for("a tick's runs", launched, RUNS_TIMEOUT_S, served)
    _stop_schedule(served)
    broker = _lose_the_broker(served, list(tick.run_ids))

    def ended() -> list[dg.RunRecord] | None:
        # Every nightly run, not only the tick's: a later tick may have come before the schedule
        # was stopped (on a busy machine), and its runs must not be writing while the bucket is
        # read. (A report run writes only the page, set aside there.)
        with served.instance() as instance:
            nightly = instance.get_run_records(dg.RunsFilter(job_name="nightly"))
        if not all(r.dagster_run.is_finished for r in nightly):
            return None
        return _runs(served, list(tick.run_ids))

    runs = wait_for("the runs' ends", ended, RUNS_TIMEOUT_S, served)
    pids = [_run_pid(served, r.dagster_run.run_id) for r in runs]
    seen = night.pools.workers
    workers = {seen.get(pid or 0, f"not a worker's pool process: {pid}") for pid in pids}
    return FirstNight(tick, runs, workers, broker)


def _last_month_start() -> date:
    return (datetime.now(UTC).date().replace(day=1) - timedelta(days=1)).replace(day=1)


def _alone(env: dict[str, str], tick: datetime, root: Path) -> dict[str, Rows]:
    """Each account's night, extracted alone (its own runs, in this process) on local disk:
    the schedule's requests for that tick."""
    rows = {}
    with pytest.MonkeyPatch.context() as patch, dg.instance_for_test() as instance:
        # The accounts' credentials: the runs' resources read them from the environment.
        for name, value in env.items():
            if name.startswith("WHITEBIT_") and name != "WHITEBIT_NIGHTLY_CRON":
                patch.setenv(name, value)
        settings = Settings.from_env({k: v for k, v in env.items() if k != "WHITEBIT_NIGHTLY_CRON"})
        for account in load(settings):
            own = root / account.name
            alone = Settings.from_env({**settings.environ, "WAREHOUSE_ROOT": str(own)})
            built = location(alone, [account])
            nightly = built.definitions.resolve_job_def("nightly")
            for request in nightly_requests(built.built, tick):
                result = nightly.execute_in_process(
                    instance=instance,
                    asset_selection=request.asset_selection,
                    partition_key=request.partition_key,
                    tags=request.tags,
                    raise_on_error=False,
                )
                # The horizon warns of the six months a night leaves to a backfill.
                said = [
                    t
                    for t in failures(result, horizon_warnings=False)
                    if "nightly_partition_fresh" not in t
                ]
                assert said == [], said
            catalog.refresh(Warehouse.open(own))
            rows[account.name] = warehouse_rows(own, account.name)
    return rows


def _on_s3(night: Night) -> dict[str, Rows]:
    state = str(night.base / "test-state")
    catalog.refresh(Warehouse.open(night.root, state_home=state))
    return {name: warehouse_rows(night.root, name, state_home=state) for name in ACCOUNTS}


@pytest.fixture(scope="module")
def alone(
    night: Night, first_night: FirstNight, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Rows]:
    """Each account extracted alone for the night of the first tick (the one extracted as the
    service started, unless UTC midnight came between)."""
    tick = datetime.fromtimestamp(first_night.tick.timestamp, UTC)
    if tick.date() == night.alone_tick.date():
        return night.alone
    return _alone(night.env, tick, tmp_path_factory.mktemp("alone"))


def test_a_night_of_two_accounts_runs_on_both_workers_and_lands_on_s3_as_each_alone(
    night: Night, first_night: FirstNight, alone: dict[str, Rows]
) -> None:
    runs = first_night.runs
    assert [r.dagster_run.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * len(runs)
    assert sorted(r.dagster_run.tags[ACCOUNT_TAG] for r in runs) == sorted([*ACCOUNTS] * 2)
    # Each launched as a Celery task, run by the service's two workers, side by side.
    assert all(CELERY_TASK_TAG in r.dagster_run.tags for r in runs)
    assert {name.split("@")[0] for name in first_night.workers} == {"whitebit-1", "whitebit-2"}
    spans = sorted((r.start_time or 0.0, r.end_time or 0.0) for r in runs)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))

    landed = _on_s3(night)
    for name in ACCOUNTS:
        assert landed[name] == alone[name], name
        assert landed[name]["funding_history"], name
        assert landed[name]["main_balances"], name
    funding = [tuple(rows["funding_history"]) for rows in landed.values()]
    assert len(set(funding)) == len(ACCOUNTS)  # each account its own, none another's copy
    # Nothing but the tables' files and each account's source record in the bucket: no lease
    # left, no temp object.
    keys = _keys_but_the_report(night)
    assert keys
    assert all(k.endswith(f"/{layout.PARTITION_FILE}") for k in keys), keys
    sources = night.store.filesystem().find(f"{night.root.removeprefix('s3://')}/{SOURCES_DIR}")
    assert sorted(k.rsplit("/", 1)[1] for k in sources) == [f"{n}.json" for n in ACCOUNTS]


def _snapshot_days(night: Night, account: str) -> set[date]:
    """The days of an account's main balance snapshots on S3."""
    store = Warehouse.open(night.root, state_home=str(night.base / "test-state")).store
    files = partitions.partition_files(store, "main_balances", account=account)
    return {date.fromisoformat(path.split("snapshot_date=")[1][:10]) for path in files}


def test_a_broker_killed_mid_night_is_started_again_and_the_night_lands(
    night: Night, first_night: FirstNight
) -> None:
    served, lost = night.service, first_night.broker
    assert lost.again != lost.killed
    said = "the Celery broker (redis-server) exited (-9): started again"
    assert said in served.output()
    # The service never stopped: the broker was started again in it.
    assert served.process is not None
    assert served.process.poll() is None
    # The runs going when the broker was lost went on, known to the Redis started again (it
    # reloaded their tasks): each ended in success, none was failed or tried again.
    ended = {r.dagster_run.run_id: r.dagster_run for r in first_night.runs}
    assert lost.cut
    assert all(ended[r.run_id].status == dg.DagsterRunStatus.SUCCESS for r in lost.cut)
    with served.instance() as instance:
        nightly = list(instance.get_runs(filters=dg.RunsFilter(job_name="nightly")))
    assert {r.status for r in nightly} == {dg.DagsterRunStatus.SUCCESS}, nightly
    assert not any(PARENT_TAG in r.tags for r in nightly)
    # Every account's funding of yesterday and its snapshot of the night are on S3.
    tick = datetime.fromtimestamp(first_night.tick.timestamp, UTC).date()
    landed = _on_s3(night)
    for name in ACCOUNTS:
        assert tick - timedelta(days=1) in {row[-1] for row in landed[name]["funding_history"]}
        taken = _snapshot_days(night, name)
        assert taken, name
        assert all(tick <= day <= datetime.now(UTC).date() for day in taken), taken


def _launch(service: Service, account: str, month: str, queue: str | None = None) -> str:
    """One funding month of one account, launched from outside as the UI does (to the Celery
    queue ``queue`` when given)."""
    client = DagsterGraphQLClient("127.0.0.1", port_number=service.port, timeout=60)
    queued = {DAGSTER_CELERY_QUEUE_TAG: queue} if queue else {}
    return client.submit_job_execution(
        "nightly",
        asset_selection=[dg.AssetKey([account, "funding_history"])],
        tags={"dagster/partition": month, ACCOUNT_TAG: account, **queued},
    )


def _keys_but_the_report(night: Night) -> list[str]:
    """The bucket's keys but the report page, which the sensor writes after a night's runs, at
    a moment of its own, each account's source record (written once, by its first run), and
    the horizon's records of days found lost (written at its first look)."""
    base = night.root.removeprefix("s3://")
    page = f"{base}/{report.REPORT_FILE}"
    records = (f"{base}/{SOURCES_DIR}/", f"{base}/{archive.LOST_RECORDS}/")
    found = night.store.filesystem().find(night.bucket)
    return [k for k in found if k != page and not k.startswith(records)]


def _month_key(night: Night, account: str, month: str) -> str:
    return (
        f"{night.bucket}/warehouse/{layout.PARQUET_DIR}/funding_history/account={account}/"
        f"funding_month={month}/{layout.PARTITION_FILE}"
    )


def _status(service: Service, run_id: str) -> dg.DagsterRun | None:
    with service.instance() as instance:
        return instance.get_run_by_id(run_id)


def _worker_environment(service: Service) -> dict[str, str]:
    """The environment of the service's first worker: what a worker on another machine is given
    (the instance's, the warehouse's and the broker's variables)."""
    assert service.process is not None
    for process in psutil.Process(service.process.pid).children(recursive=True):
        if "-n whitebit-1@" in _command(process):
            return process.environ()
    raise AssertionError("the service's first worker is not running")


@pytest.fixture
def killable(night: Night) -> Iterator[Child]:
    """A third worker, started as on another machine, taking the runs of its own queue only; in
    its processes, the first Parquet write dies halfway (SIGKILL) with the process running the
    run (`tests.reliability.killer`)."""
    args = ["worker", "parquet-mid-file", "--at", "1", "--queue", KILL_QUEUE, "--"]
    args += ["--concurrency", "1", "--name", "killable"]
    log = night.base / "logs" / "killable"
    worker = Child.start("tests.reliability.killer", args, _worker_environment(night.service), log)
    try:
        wait_for(
            "the killable worker, ready", lambda: " ready." in worker.output, 60, night.service
        )
        yield worker
    finally:
        worker.process.terminate()
        worker.process.wait(timeout=30)


def test_a_worker_killed_mid_write_leaves_the_old_object_and_a_rerun_mends_it(
    night: Night, first_night: FirstNight, alone: dict[str, Rows], killable: Child
) -> None:
    served, fs = night.service, night.store.filesystem()
    tick = datetime.fromtimestamp(first_night.tick.timestamp, UTC)
    month = month_of(tick.date() - timedelta(days=1))
    key = _month_key(night, KILLED, month)
    old = fs.cat_file(key)

    run_id = _launch(served, KILLED, month, queue=KILL_QUEUE)

    def failed() -> dg.DagsterRun | None:
        run = _status(served, run_id)
        return run if run is not None and run.is_finished else None

    run = wait_for("the killed run, failed", failed, RECOVERY_TIMEOUT_S, served)
    # Killed halfway through the month's Parquet file, in the run's writer, with the run.
    assert "killer: SIGKILL in the writer" in killable.output
    assert "WorkerLostError" in killable.output
    assert run.status == dg.DagsterRunStatus.FAILURE
    with served.instance() as instance:
        said = [e.message for e in instance.all_logs(run_id)]
    assert any("Celery task failed" in m for m in said), said[-3:]
    # The month's old object, whole: the half file never left the dead process.
    assert fs.cat_file(key) == old
    assert _on_s3(night) == alone

    rerun = _launch(served, KILLED, month)

    def rerun_ended() -> dg.DagsterRun | None:
        found = _status(served, rerun)
        return found if found is not None and found.is_finished else None

    again = wait_for("the rerun", rerun_ended, RECOVERY_TIMEOUT_S, served)
    assert again.status == dg.DagsterRunStatus.SUCCESS, served.output()[-4000:]
    assert fs.cat_file(key) != old  # written again, by the rerun
    assert _on_s3(night) == alone
    # Nothing but partitions: the dead writer's lease was taken over and given back.
    keys = _keys_but_the_report(night)
    assert all(k.endswith(f"/{layout.PARTITION_FILE}") for k in keys), keys


def _command(process: psutil.Process) -> str:
    """A process's command line; nothing for one that has just ended (a pool process replaced
    after its run, not yet reaped)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


def test_sigterm_stops_the_service_its_workers_and_redis(night: Night) -> None:
    served = night.service
    assert served.process is not None
    commands = [_command(p) for p in psutil.Process(served.process.pid).children(recursive=True)]
    assert sum("redis-server" in c for c in commands) == 1, commands
    # Both workers (their pool processes come and go: one per run).
    for name in ("whitebit-1@", "whitebit-2@"):
        assert any("celery" in c and f"-n {name}" in c for c in commands), commands
    served.assert_stops_cleanly()
