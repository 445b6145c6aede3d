"""The nightly service, unattended, on PostgreSQL: `whitebit-etl serve` starts the code location
server, a real `dagster-daemon` and the webserver; the daemon's schedule (every minute here)
launches both nightly runs; a SIGKILLed service started again resumes without a duplicate run; a
failed night reaches the webhook once per failed run; SIGTERM stops everything cleanly."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import psycopg2
import pytest

from assets.dagster_private import InstigatorTick, InstigatorType
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import warehouse_rows
from tests.support.postgres import LocalPostgres
from tests.support.service import (
    Received,
    Service,
    Webhook,
    service_env,
    wait_for,
    webhook_receiver,
)
from warehouse import Warehouse, catalog
from warehouse.schemas import month_of

pytestmark = pytest.mark.slow

RUN_ID = re.compile(r"\brun ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
#: The first tick comes at the next minute; then the runs start and load.
RUNS_TIMEOUT_S = 600  # a night now runs every declared history; a busy machine
#: The sensors look every 15 s: a failed run reaches the webhook well within a minute.
ALERT_WITHIN_S = 60


def _nightly_runs_of(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return [
        run
        for run in instance.get_runs()
        if run.tags.get("dagster/schedule_name") == "nightly_schedule"
    ]


def _sql(url: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(query, args)
        rows: list[tuple[object, ...]] = cursor.fetchall()
    connection.close()
    return rows


@dataclass
class Night:
    """A service of its own: its database, its warehouse, its webhook."""

    service: Service
    webhook: Webhook
    database: str
    base: Path
    #: The UTC day the service was launched on.
    started: date = field(default_factory=lambda: datetime.now(UTC).date())


WRONG_SECRET = "not-the-secret-" + "x" * 16


@pytest.fixture(scope="module")
def nights(
    postgres: LocalPostgres,
    today_exchange: SpawnedSimulator,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Night]]:
    """Two services started together, so that their first ticks fall in the same minute: one
    with the account's credentials, one with a wrong secret (a failing night)."""
    made: dict[str, Night] = {}
    with ExitStack() as stack:
        for name, secret in (("sound", None), ("failing", WRONG_SECRET)):
            base = tmp_path_factory.mktemp(name)
            hook = stack.enter_context(webhook_receiver())
            database = postgres.new_database()
            env = service_env(today_exchange, base, postgres.url(database), hook, secret=secret)
            made[name] = Night(Service(env, base / "logs" / "serve"), hook, database, base)
            stack.callback(made[name].service.stop)
        for night in made.values():
            night.service.launch()
        for night in made.values():
            night.service.wait_ready()
        yield made


def _ticks(service: Service) -> list[InstigatorTick]:
    """The nightly schedule's ticks, oldest first."""
    with service.instance() as instance:
        (state,) = [
            s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SCHEDULE)
            if s.instigator_name == "nightly_schedule"
        ]
        ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id)
    return sorted(ticks, key=lambda t: t.timestamp)


def _tick_done(
    service: Service, after: float, status: dg.DagsterRunStatus = dg.DagsterRunStatus.SUCCESS
) -> Callable[[], InstigatorTick | None]:
    """A tick after ``after`` whose two runs have ended with ``status``."""

    def probe() -> InstigatorTick | None:
        with service.instance() as instance:
            for tick in _ticks(service):
                if tick.timestamp < after or len(tick.run_ids) != 2:
                    continue
                runs = [instance.get_run_by_id(run_id) for run_id in tick.run_ids]
                if all(r is not None and r.status == status for r in runs):
                    return tick
        return None

    return probe


def test_the_schedule_runs_both_nightly_runs_and_a_killed_service_resumes_it(
    postgres: LocalPostgres, nights: dict[str, Night]
) -> None:
    night = nights["sound"]
    served, tmp_path = night.service, night.base
    url = postgres.url(night.database, driver="")
    first = wait_for("a tick's two runs", _tick_done(served, 0), RUNS_TIMEOUT_S, served)

    # In the warehouse: the month's funding so far, yesterday's included; today's snapshots
    # (today: the day the tick took them, whichever side of midnight the session is on).
    rows = warehouse_rows(tmp_path / "warehouse")
    with catalog.connect(Warehouse.open(tmp_path / "warehouse")) as con:
        ((today,),) = con.execute("SELECT DISTINCT snapshot_date FROM main_balances").fetchall()
    assert today in (night.started, datetime.now(UTC).date())
    yesterday = today - timedelta(days=1)
    funding_days = {row[-1] for row in rows["funding_history"]}
    assert yesterday in funding_days
    assert {month_of(day) for day in funding_days} == {month_of(yesterday)}
    assert max(funding_days) <= today
    with served.instance() as instance:
        runs = [instance.get_run_by_id(run_id) for run_id in first.run_ids]
    # The month that holds yesterday; the snapshots are not partitioned.
    assert sorted(str(r.tags.get("dagster/partition")) for r in runs if r is not None) == sorted(
        [month_of(yesterday), "None"]
    )
    # In PostgreSQL's run history, not in a file beside it.
    assert set(first.run_ids) <= {run_id for (run_id,) in _sql(url, "SELECT run_id FROM runs")}
    assert not list(Path(served.home).glob("**/*.db"))

    # Killed at once, whatever it was doing (evaluating a tick, launching or running a run).
    before = max(tick.tick_id for tick in _ticks(served))
    killed_at = time.time()
    served.kill()
    assert not served.group_alive()
    served.start()

    def resumed() -> list[InstigatorTick] | None:
        """A tick after the restart that launched its two runs."""
        found = [t for t in _ticks(served) if t.tick_id > before and len(t.run_ids) == 2]
        return found or None

    wait_for("a tick after the restart", resumed, RUNS_TIMEOUT_S, served)

    # No tick launched a run twice, before the kill, across it, or after it; and every nightly
    # run came from one tick, but for those of a tick the kill cut off while it launched them
    # (made before the kill, and listed by no tick when its minute had passed at the restart:
    # Dagster redoes a cut-off tick only within its time, for a schedule without partitions; a
    # nightly cron's is a day) and those of a tick launching them as they are read (made since the
    # newest tick began: it lists its runs once it has launched them all, and the run queue may
    # have started one by then).
    with served.instance() as instance:
        nightly = {r.run_id for r in _nightly_runs_of(instance)}
        ticks = _ticks(served)
        launched = [run_id for tick in ticks for run_id in tick.run_ids]
        assert len(launched) == len(set(launched))
        cut_off = list(nightly - set(launched))
        records = instance.get_run_records(dg.RunsFilter(run_ids=cut_off)) if cut_off else []
        assert len(records) == len(cut_off)
        newest_tick = max(tick.timestamp for tick in ticks)
        for record in records:
            run = record.dagster_run
            launching = run.status in (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED)
            created = record.create_timestamp.timestamp()
            assert launching or created <= killed_at or created >= newest_tick, run
        for tick in ticks:
            partitions = [
                run.tags.get("dagster/partition")
                for run in map(instance.get_run_by_id, tick.run_ids)
                if run is not None
            ]
            assert len(partitions) == len(set(partitions)) <= 2, (tick.timestamp, partitions)
        # The run history and the partitions' status survived the restart.
        assert set(first.run_ids) <= nightly
        key = dg.AssetKey(["default", "funding_history"])
        materialized = instance.get_materialized_partitions(key)
        assert month_of(yesterday) in materialized

    # Stopped while the new tick's runs may still run: none is left "started".
    served.assert_stops_cleanly()


def test_a_failed_night_reaches_the_webhook_once_per_run_with_its_reason_and_no_secret(
    postgres: LocalPostgres, today_exchange: SpawnedSimulator, nights: dict[str, Night]
) -> None:
    served, webhook = nights["failing"].service, nights["failing"].webhook
    # Every minute's tick launches two runs, which fail: the first tick's are the night here.
    first = wait_for(
        "a tick's two runs, failed",
        _tick_done(served, 0, dg.DagsterRunStatus.FAILURE),
        RUNS_TIMEOUT_S,
        served,
    )
    with served.instance() as instance:
        records = instance.get_run_records(dg.RunsFilter(run_ids=list(first.run_ids)))
    ended = max(record.end_time or 0.0 for record in records)

    def posted() -> list[Received] | None:
        found = [r for r in webhook.received if any(i in r.text for i in first.run_ids)]
        return found if len(found) >= 2 else None

    alerts = wait_for("an alert per failed run", posted, ALERT_WITHIN_S, served)
    assert all(alert.at - ended < ALERT_WITHIN_S for alert in alerts)
    # More than a sensor interval later, still one alert per run, for these runs and any other.
    time.sleep(max(0.0, 20 - (time.time() - max(a.at for a in alerts))))
    named = [RUN_ID.findall(r.text) for r in webhook.received]
    assert all(len(ids) == 1 for ids in named), named
    assert len({ids[0] for ids in named}) == len(named), named

    for record in records:
        run = record.dagster_run
        (alert,) = [a.text for a in webhook.received if run.run_id in a.text]
        assert "run of job nightly failed" in alert
        partition = run.tags.get("dagster/partition")
        account = "(account default, "  # the account's runs, tagged by the schedule
        assert account + (f"partition {partition}, " if partition else "status FAILURE") in alert
        assert "failed step" in alert
        assert "401" in alert or "invalid" in alert.lower(), alert
        assert f"http://dagster.example.test:3000/runs/{run.run_id}" in alert
    secrets = [
        WRONG_SECRET,
        today_exchange.credentials.api_secret,
        postgres.password,
        "s3cr3t-path",
    ]
    for received in webhook.received:
        for secret in secrets:
            assert secret not in received.text

    code, _ = served.terminate()
    assert code == 0
    assert served.group_ends()
