"""The Celery broker lost in the middle of a night: `whitebit-etl serve --workers 2` with three
accounts, its instance on PostgreSQL, its runs on the two Celery workers beside it, and the
redis-server it started itself SIGKILLed while the night's runs go.

The service keeps running: it starts its Redis again (same port, same password, its
append-only file reloaded), and the workers reconnect. The runs going go on, their tasks known
to the Redis started again, and the runs queued stay queued: by the night's end every account's
funding of yesterday and its snapshots of today are in the warehouse, every run of the night a
success, none failed nor tried again. What docs/many-machines.md says of a broker lost is what
this test sees.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import httpx
import psutil
import pytest

from assets.dagster_private import InstigatorType
from assets.steps import ACCOUNT_TAG
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import two_accounts_env
from tests.support.postgres import LocalPostgres
from tests.support.service import Service, wait_for
from warehouse import Warehouse, partitions

#: Long: the night's runs walk each history's month so far on a machine shared with other work,
#: and the runs the outage cut off go again once run monitoring has failed them.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

#: Account name to the simulator key it uses: the main account and both sub-accounts.
THREE_ACCOUNTS = {"main": "partner", "sub_1": "sub_1", "sub_2": "sub_2"}
#: What each account extracts: a history and a snapshot (the broker is under test here).
NIGHT = ("funding_history", "main_balances")
#: The first tick comes at the next minute; its six runs are launched soon after.
TICK_TIMEOUT_S = 240
#: The night's end, from the broker's loss: run monitoring fails a run whose task is unknown
#: (a look every 15 s; one that never started after 180 s), run retries launch it again, and
#: the night's six runs go on two workers.
NIGHT_TIMEOUT_S = 1200
#: The message of a run retried: Dagster's tag on a retry, naming the run it retries.
PARENT_TAG = "dagster/parent_run_id"


@dataclass
class Night:
    service: Service
    root: Path


@pytest.fixture(scope="module")
def night(
    postgres: LocalPostgres,
    today_exchange: SpawnedSimulator,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Night]:
    """The service with two workers and a Redis of its own, on PostgreSQL, three accounts, a
    warehouse on local disk; the schedule fires every minute."""
    base = tmp_path_factory.mktemp("broker-lost")
    root = base / "warehouse"
    env = two_accounts_env(
        today_exchange,
        root,
        base / "dagster",
        base / "accounts.yaml",
        THREE_ACCOUNTS,
        histories=NIGHT,
    )
    env = {k: v for k, v in env.items() if not k.startswith("CELERY_")}
    env |= {
        "DAGSTER_POSTGRES_URL": postgres.url(postgres.new_database()),
        "WHITEBIT_NIGHTLY_CRON": "* * * * *",
        "XDG_STATE_HOME": str(base / "state"),
        "WAREHOUSE_LEASE_SECONDS": "5",
    }
    service = Service(env, base / "logs" / "serve", args=["--workers", "2"])
    try:
        service.start()
        yield Night(service, root)
    finally:
        service.stop()


def _stop_schedule(service: Service) -> None:
    """Stop the nightly schedule, as its toggle in the UI does."""
    with service.instance() as instance:
        (state,) = [
            s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)
            if s.instigator_name == "nightly_schedule"
        ]
    mutation = """
      mutation Stop($origin: String, $selector: String) {
        stopRunningSchedule(scheduleOriginId: $origin, scheduleSelectorId: $selector) {
          __typename
        }
      }"""
    variables = {"origin": state.instigator_origin_id, "selector": state.selector_id}
    answer = httpx.post(
        service.url + "/graphql", json={"query": mutation, "variables": variables}, timeout=30
    ).json()
    assert answer["data"]["stopRunningSchedule"]["__typename"] == "ScheduleStateResult", answer


def _redis(service: Service) -> psutil.Process | None:
    assert service.process is not None
    for process in psutil.Process(service.process.pid).children(recursive=True):
        try:
            if "redis-server" in " ".join(process.cmdline()):
                return process
        except psutil.Error:
            continue
    return None


def _nightly(service: Service) -> list[dg.DagsterRun]:
    with service.instance() as instance:
        return list(instance.get_runs(filters=dg.RunsFilter(job_name="nightly")))


def _kind(run: dg.DagsterRun) -> str:
    """``funding`` for a run of the funding history, ``snapshots`` for one of the snapshots."""
    keys = run.asset_selection or set()
    return "funding" if any(k.path[-1] == "funding_history" for k in keys) else "snapshots"


def _funding_days(root: Path, account: str) -> set[date]:
    store = Warehouse.open(root).store
    days: set[date] = set()
    for path in partitions.partition_files(store, "funding_history", account=account):
        table = store.read_table(path, columns=["funding_date"])
        if table is not None:
            days |= set(table.column("funding_date").to_pylist())
    return days


def _snapshot_days(root: Path, account: str) -> set[str]:
    """The days of the account's main balance snapshots in the warehouse."""
    store = Warehouse.open(root).store
    files = partitions.partition_files(store, "main_balances", account=account)
    return {path.split("snapshot_date=")[1].split("/")[0] for path in files}


def test_a_broker_killed_mid_night_is_started_again_and_the_night_lands(night: Night) -> None:
    served = night.service

    def going() -> list[dg.DagsterRun] | None:
        runs = _nightly(served)
        started = [r for r in runs if r.status == dg.DagsterRunStatus.STARTED]
        return started if len(runs) >= 6 and started else None

    cut = wait_for("the night's runs, going", going, TICK_TIMEOUT_S, served)
    _stop_schedule(served)  # the night's runs are launched: no later tick adds any
    redis = _redis(served)
    assert redis is not None, served.output()[-3000:]
    killed_at = datetime.now(UTC)
    os.kill(redis.pid, signal.SIGKILL)
    assert cut

    def restarted() -> psutil.Process | None:
        again = _redis(served)
        return again if again is not None and again.pid != redis.pid else None

    wait_for("Redis, started again", restarted, 60, served)
    said = "the Celery broker (redis-server) exited (-9): started again"
    wait_for("the service, saying so", lambda: said in served.output(), 30, served)

    today = killed_at.date()
    yesterday = today - timedelta(days=1)

    def landed() -> dict[str, list[dg.DagsterRun]] | None:
        runs = _nightly(served)
        if not all(r.is_finished for r in runs):
            return None
        done: dict[str, list[dg.DagsterRun]] = {}
        for name in THREE_ACCOUNTS:
            mine = [r for r in runs if r.tags.get(ACCOUNT_TAG) == name]
            kinds = {_kind(r) for r in mine if r.status == dg.DagsterRunStatus.SUCCESS}
            if kinds != {"funding", "snapshots"}:
                return None
            done[name] = mine
        return done

    done = wait_for("every account's night, landed", landed, NIGHT_TIMEOUT_S, served)
    # The service never stopped: the broker was started again in it.
    assert served.process is not None
    assert served.process.poll() is None
    for name in THREE_ACCOUNTS:
        assert yesterday in _funding_days(night.root, name), name
        assert today.isoformat() in _snapshot_days(night.root, name), name
    # The runs going when the broker was lost went on, known to the Redis started again (it
    # reloaded their tasks): each ended in success, none was failed or tried again.
    runs = [r for mine in done.values() for r in mine]
    ended = {r.run_id: r.status for r in runs}
    assert all(ended[r.run_id] == dg.DagsterRunStatus.SUCCESS for r in cut), ended
    assert set(ended.values()) == {dg.DagsterRunStatus.SUCCESS}, ended
    assert not any(PARENT_TAG in r.tags for r in runs), ended
    served.assert_stops_cleanly()
