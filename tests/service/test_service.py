"""The nightly service, unattended, on PostgreSQL: `whitebit-etl serve` starts the code location
server, a real `dagster-daemon` and the webserver; the daemon's schedule (every minute here)
launches both nightly runs; a SIGKILLed service started again resumes without a duplicate run; a
failed night reaches the webhook once per failed run; SIGTERM stops everything cleanly."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar

import dagster as dg
import psycopg2
import pytest
from dagster._core.scheduler.instigation import InstigatorTick, InstigatorType

from bench.postgres import LocalPostgres
from pipeline.simulator import SpawnedSimulator
from tests.reliability.conftest import warehouse_rows
from tests.service.conftest import Service, Webhook, service_env, utc_today

pytestmark = pytest.mark.slow

T = TypeVar("T")
#: The first tick comes at the next minute; then the runs start and load.
RUNS_TIMEOUT_S = 240
#: The sensors look every 15 s: a failed run reaches the webhook well within a minute.
ALERT_WITHIN_S = 60


def _wait(what: str, probe: Callable[[], T | None], timeout: float, service: Service) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        assert service.process is not None
        assert service.process.poll() is None, service.output()
        assert time.monotonic() < deadline, (
            f"{what}: not in {timeout:.0f} s\n{service.output()[-4000:]}"
        )
        time.sleep(2)


def _nightly_runs_of(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return [
        run
        for run in instance.get_runs()
        if run.tags.get("dagster/schedule_name") == "nightly_schedule"
    ]


def _finished(service: Service, count: int) -> Callable[[], list[dg.DagsterRun] | None]:
    def probe() -> list[dg.DagsterRun] | None:
        with service.instance() as instance:
            runs = _nightly_runs_of(instance)
        return runs if len(runs) >= count and all(r.is_finished for r in runs) else None

    return probe


def _sql(url: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(query, args)
        rows: list[tuple[object, ...]] = cursor.fetchall()
    connection.close()
    return rows


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Service]]:
    made: list[Service] = []

    def make(env: dict[str, str]) -> Service:
        made.append(Service(env, tmp_path / "logs" / "serve"))
        return made[-1]

    yield make
    for s in made:
        s.stop()


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


def _tick_done(service: Service, after: float) -> Callable[[], InstigatorTick | None]:
    """A tick after ``after`` whose two runs have succeeded."""

    def probe() -> InstigatorTick | None:
        with service.instance() as instance:
            for tick in _ticks(service):
                if tick.timestamp < after or len(tick.run_ids) != 2:
                    continue
                runs = [instance.get_run_by_id(run_id) for run_id in tick.run_ids]
                if all(r is not None and r.status == dg.DagsterRunStatus.SUCCESS for r in runs):
                    return tick
        return None

    return probe


def test_the_schedule_runs_both_nightly_runs_and_a_killed_service_resumes_it(
    postgres: LocalPostgres,
    today_exchange: SpawnedSimulator,
    webhook: Webhook,
    tmp_path: Path,
    service: Callable[[dict[str, str]], Service],
) -> None:
    database = postgres.new_database()
    url = postgres.url(database, driver="")
    served = service(service_env(today_exchange, tmp_path, postgres.url(database), webhook))
    served.start()
    first = _wait("a tick's two runs", _tick_done(served, 0), RUNS_TIMEOUT_S, served)

    today = date.fromisoformat(utc_today())
    yesterday = (today - timedelta(days=1)).isoformat()
    with served.instance() as instance:
        runs = [instance.get_run_by_id(run_id) for run_id in first.run_ids]
    assert sorted(r.tags["dagster/partition"] for r in runs if r is not None) == [
        yesterday,
        today.isoformat(),
    ]
    # In the warehouse: yesterday's funding, today's snapshots.
    rows = warehouse_rows(tmp_path / "warehouse")
    assert {str(row[-1]) for row in rows["funding_history"]} == {yesterday}
    assert rows["main_balances"]
    # In PostgreSQL's run history, not in a file beside it.
    assert set(first.run_ids) <= {run_id for (run_id,) in _sql(url, "SELECT run_id FROM runs")}
    assert not list(Path(served.home).glob("**/*.db"))

    # Killed at once, whatever it was doing (evaluating a tick, launching or running a run).
    served.kill()
    assert not served.group_alive()
    restarted_at = time.time()
    served.start()
    _wait("a tick after the restart", _tick_done(served, restarted_at), RUNS_TIMEOUT_S, served)

    # No tick launched a run twice, before the kill, across it, or after it.
    ticks = _ticks(served)
    launched = [run_id for tick in ticks for run_id in tick.run_ids]
    assert len(launched) == len(set(launched))
    with served.instance() as instance:
        for tick in ticks:
            partitions = [
                run.tags["dagster/partition"]
                for run in map(instance.get_run_by_id, tick.run_ids)
                if run is not None
            ]
            assert len(partitions) == len(set(partitions)) <= 2, (tick.timestamp, partitions)
        nightly = {r.run_id for r in _nightly_runs_of(instance)}
        # The run history and the partitions' status survived the restart.
        assert set(first.run_ids) <= nightly
        assert yesterday in instance.get_materialized_partitions(dg.AssetKey("funding_history"))
    assert nightly == set(launched)

    code, seconds = served.terminate()
    assert code == 0, served.output()[-3000:]
    assert seconds < 20
    assert not served.group_alive()
    assert "whitebit-etl serve: stopped" in served.output()


def test_a_failed_night_reaches_the_webhook_once_per_run_with_its_reason_and_no_secret(
    postgres: LocalPostgres,
    today_exchange: SpawnedSimulator,
    webhook: Webhook,
    tmp_path: Path,
    service: Callable[[dict[str, str]], Service],
) -> None:
    wrong = "not-the-secret-" + "x" * 16
    env = service_env(
        today_exchange, tmp_path, postgres.url(postgres.new_database()), webhook, secret=wrong
    )
    served = service(env)
    served.start()
    runs = _wait("both nightly runs", _finished(served, 2), RUNS_TIMEOUT_S, served)
    assert {r.status for r in runs} == {dg.DagsterRunStatus.FAILURE}
    with served.instance() as instance:
        ended = max(
            record.end_time or 0.0
            for record in instance.get_run_records(dg.RunsFilter(run_ids=[r.run_id for r in runs]))
        )
    _wait("an alert per failed run", lambda: len(webhook.received) >= 2, ALERT_WITHIN_S, served)
    time.sleep(20)  # more than a sensor interval: no second alert comes
    texts = [r.text for r in webhook.received]
    assert len(texts) == 2, texts
    for run in runs:
        (alert,) = [t for t in texts if run.run_id in t]
        assert "job nightly" in alert
        assert f"partition {run.tags['dagster/partition']}" in alert
        assert "failed step" in alert
        assert "401" in alert or "invalid" in alert.lower(), alert
        assert f"http://dagster.example.test:3000/runs/{run.run_id}" in alert
    assert all(r.at - ended < ALERT_WITHIN_S for r in webhook.received)
    secrets = [wrong, today_exchange.credentials.api_secret, postgres.password, "s3cr3t-path"]
    for text in texts:
        for secret in secrets:
            assert secret not in text

    code, _ = served.terminate()
    assert code == 0
    assert not served.group_alive()
