"""The alert sensors exist only with a webhook; an alert names the job, the partition, the failed
step and its reason, links to the run, and carries no secret. What is lost (days past the
exchange's six months never archived, a residual of the reconciliation) fails the run that found
it and reaches a webhook on loopback; days still at stake do not."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import click
import dagster as dg
from click.testing import CliRunner
from rich.console import Console

from assets import alerts
from assets.accounts import load
from assets.cli import main
from assets.cli._materialize import _requests
from assets.definitions import location
from assets.outcomes import outcome
from assets.runs import cause_of, materialize
from assets.settings import Settings
from pipeline import spec
from pipeline.spec import WALL_CLOCK, SimClock
from tests.support.records import DAY_START
from tests.support.service import webhook_receiver
from warehouse import Warehouse, archive, normalize, partitions

WEBHOOK = {"WHITEBIT_ALERT_WEBHOOK_URL": "http://127.0.0.1:9/hook"}


def test_no_sensor_without_a_webhook() -> None:
    settings = Settings.from_env({})
    assert alerts.sensors(settings, load(settings)) == []
    settings = Settings.from_env(WEBHOOK)
    assert {s.name for s in alerts.sensors(settings, load(settings))} == {
        "alert_on_run_failure",
        "alert_on_blocking_check_failure",
    }


def _alerts(env: dict[str, str]) -> alerts.Alerts:
    settings = Settings.from_env({**WEBHOOK, **env})
    found = alerts.Alerts.of(settings, load(settings))
    assert found is not None
    return found


def _failed_run(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, **run: object
) -> dg.DagsterRun:
    """A failed run of ``asset`` through a job of the location's kind (the nightly job's name)."""
    job = dg.Definitions(
        assets=[asset], jobs=[dg.define_asset_job("nightly", selection=[asset])]
    ).resolve_job_def("nightly")
    result = job.execute_in_process(instance=instance, raise_on_error=False, **run)  # type: ignore[arg-type]
    found = instance.get_run_by_id(result.run_id)
    assert found is not None
    return found


DAYS = dg.DailyPartitionsDefinition(start_date="2026-01-01")


@dg.asset(partitions_def=DAYS)
def walked() -> None:
    raise dg.Failure(description="the exchange refused key-123 / secret-456: 401\nsecond line")


def test_the_message_names_what_failed_and_why_without_secrets() -> None:
    said = _alerts(
        {
            "WHITEBIT_API_KEY": "key-123",
            "WHITEBIT_API_SECRET": "secret-456",
            "WHITEBIT_UI_URL": "https://dagster.example.test/",
        }
    )
    with dg.instance_for_test() as instance:
        run = _failed_run(
            instance,
            walked,
            partition_key="2026-03-04",
            tags={"whitebit/account": "sub_1"},  # as the schedule tags each account's runs
        )
        text = alerts.message(instance, run, said)
    assert "job nightly failed (account sub_1, partition 2026-03-04, status FAILURE)" in text
    assert "failed step walked: the exchange refused" in text
    assert "401 / second line" in text
    assert f"https://dagster.example.test/runs/{run.run_id}" in text
    assert "key-123" not in text
    assert "secret-456" not in text
    assert "<WHITEBIT_API_KEY> / <WHITEBIT_API_SECRET>" in text


@dg.asset
def refused() -> None:
    raise dg.Failure(
        description="refused main-key-789 with secret main-secret-012 at "
        "postgresql+psycopg2://u:pw@db/x"
    )


def test_the_message_carries_no_key_of_an_account_of_the_accounts_file(tmp_path: Path) -> None:
    """An accounts file names the variables holding each account's key and secret: their values
    are scrubbed as the single-account ones are, and so is the database URL."""
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(
        "accounts:\n  - name: main\n    api_key_env: MAIN_KEY\n    api_secret_env: MAIN_SECRET\n"
    )
    said = _alerts(
        {
            "WHITEBIT_ACCOUNTS_FILE": str(accounts),
            "MAIN_KEY": "main-key-789",
            "MAIN_SECRET": "main-secret-012",
            "DAGSTER_POSTGRES_URL": "postgresql+psycopg2://u:pw@db/x",
        }
    )
    with dg.instance_for_test() as instance:
        run = _failed_run(instance, refused)
        text = alerts.message(instance, run, said)
    assert "failed step refused: refused <MAIN_KEY> with secret <MAIN_SECRET> at " in text
    assert "<DAGSTER_POSTGRES_URL>" in text
    for secret in ("main-key-789", "main-secret-012", "pw@db"):
        assert secret not in text


def test_the_fallback_is_the_reason_when_no_step_says_why() -> None:
    """A run whose process died has no failed step: the run's failure text is the reason."""
    said = _alerts({"WHITEBIT_API_KEY": "key-123", "WHITEBIT_API_SECRET": "secret-456"})
    with dg.instance_for_test() as instance:
        run = dg.DagsterRun(job_name="nightly", run_id="0" * 36, status=dg.DagsterRunStatus.FAILURE)
        text = alerts.message(instance, run, said, "the run worker for key-123 died\nwith more")
    assert "reason: the run worker for <WHITEBIT_API_KEY> died / with more" in text


def _snapshot(wh: Warehouse, at: datetime, usdt: str) -> None:
    batch = normalize.normalize(
        spec.MAIN_BALANCES,
        {"USDT": {"main_balance": usdt}},
        extracted_at=at,
        day=at.date(),
        observed_at=at,
    )
    partitions.write_batch(wh, batch, account="main")


def test_days_lost_and_a_residual_fail_the_watch_run_and_reach_the_webhook(tmp_path: Path) -> None:
    """The watch job on a warehouse whose fills were never archived since it first looked, more
    than six months ago, and whose USDT lost one between two snapshots: the run fails, its last
    line names the days lost, and the webhook receives both; the next run, with only days at
    stake left, warns and posts nothing."""
    # The horizon judged at noon of the test's day, whenever the run ends.
    clock = SimClock(datetime.combine(WALL_CLOCK.today(), time(12), UTC))
    today = clock.today()
    # The first day of history, a month's first (the first partition's), seven months back.
    first = (today - timedelta(days=200)).replace(day=1)
    root = tmp_path / "warehouse"
    wh = Warehouse.open(root)
    # The horizon was looked at before (an empty record): what fell past since is a loss.
    archive.record_lost(wh.store, "trades", "main", [])
    opening = datetime.fromtimestamp(DAY_START + 12 * 3600, UTC)
    _snapshot(wh, opening, "1000")
    _snapshot(wh, opening + timedelta(days=1), "999")  # nothing the records tell took one
    with webhook_receiver() as hook, dg.instance_for_test() as instance:
        env = {
            "WAREHOUSE_ROOT": str(root),
            "WHITEBIT_START_DATE": first.isoformat(),
            "WHITEBIT_ALERT_WEBHOOK_URL": hook.url,
        }
        settings = Settings.from_env(env)
        found = location(settings, load(settings), clock=clock)
        (sensor,) = [
            s for s in found.definitions.sensors if s.name == "alert_on_blocking_check_failure"
        ]
        watch = found.definitions.resolve_job_def("freshness")

        def watched(*ops: str) -> dg.ExecuteInProcessResult:
            started = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
            result = watch.execute_in_process(
                instance=instance, op_selection=list(ops), raise_on_error=False
            )
            sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=started.cursor))
            return result

        result = watched("main__trades_horizon", "main_views")
        assert not result.success
        said = outcome(instance, result.run_id, success=False)
        floor = spec.floor_day(today)
        lost = (floor - first).days
        loss = (
            f"trades of main: {lost} day(s) lost: never archived and past the exchange's six "
            f"months (its web export has them): {first} .. {floor - timedelta(days=1)} "
            f"({lost} days), lost from {spec.lost_on(first)}."
        )
        # The command's last line names what was lost.
        assert (cause_of(said) or "").startswith(loss)
        (posted,) = hook.received
        assert "run of job freshness failed (status FAILURE)" in posted.text
        assert f"failed check main/trades.horizon: {loss}" in posted.text
        assert (
            "failed check main/main_balances.balances_reconcile: 1 holding(s) of main moved by "
            "other than the flows its records tell (residual = closing - opening - flows): "
            "USDT 2024-03-01 .. 2024-03-02: -1 (opening 1000, flows 0, closing 999; no record of "
            "this amount)"
        ) in posted.text
        assert hook.url not in posted.text

        # Said once: the days left are at stake, the first lost tomorrow, but still to be read:
        # a warning, which fails nothing and posts nothing.
        again = watched("main__trades_horizon")
        assert again.success
        (warned,) = again.get_asset_check_evaluations()
        assert (warned.passed, warned.severity) == (False, dg.AssetCheckSeverity.WARN)
        assert (warned.description or "").startswith(
            "trades of main: not archived and soon past the exchange's six months: "
            f"{floor} .. {today - timedelta(days=1)}"
        )
        assert len(hook.received) == 1


def test_the_command_line_exits_non_zero_naming_the_days_lost(tmp_path: Path) -> None:
    """``whitebit-etl materialize`` of the fills, on a warehouse whose fills were never archived
    since it first looked more than six months ago: the run's horizon check fails it, and the
    last line names the history, the days and the date they were lost."""
    today = datetime.now(UTC).date()
    first = (today - timedelta(days=200)).replace(day=1)
    root = tmp_path / "warehouse"
    archive.record_lost(Warehouse.open(root).store, "trades", "main", [])
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("WHITEBIT_", "WAREHOUSE_", "DAGSTER_"))
    }
    env = {
        **unset,
        "WAREHOUSE_ROOT": str(root),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "WHITEBIT_START_DATE": first.isoformat(),
        "COLUMNS": "300",
    }
    asked = ["materialize", "trades", "--account", "main", "--partition", str(today)]
    done = CliRunner().invoke(main, asked, env=env)
    assert done.exit_code == 1, done.output
    assert "Traceback" not in done.output
    last = done.output.strip().splitlines()[-1]
    # The days, computed where the check ran (the test may cross a midnight).
    assert re.fullmatch(
        rf"Error: run [0-9a-f-]+ failed: trades of main: (\d+) day\(s\) lost: never archived and "
        rf"past the exchange's six months \(its web export has them\): {first} \.\. "
        r"\d{4}-\d\d-\d\d \(\1 days\), lost from \d{4}-\d\d-\d\d\. \(details: make ui\)",
        last,
    ), last


def test_the_command_lines_night_ends_with_the_reconciliation_a_residual_failing_it(
    tmp_path: Path,
) -> None:
    """``whitebit-etl materialize`` of the night (no asset, no day) ends, after every account's
    runs, with the run of what each account's views say, as the watch job checks it: on a
    warehouse whose USDT lost one between two snapshots, that run fails, and the command's last
    line names the residual."""
    root = tmp_path / "warehouse"
    opening = datetime.fromtimestamp(DAY_START + 12 * 3600, UTC)
    wh = Warehouse.open(root)
    _snapshot(wh, opening, "1000")
    _snapshot(wh, opening + timedelta(days=1), "999")
    settings = Settings.from_env({"WAREHOUSE_ROOT": str(root)})
    found = location(settings, load(settings))
    with click.Context(main, obj=settings):
        night = _requests(
            found.built,
            (),
            None,
            None,
            now=WALL_CLOCK.moment(),
            named=False,
            out=Console(quiet=True),
        )
    views = [(account, r) for account, r in night if not r.asset_selection]
    assert [account for account, _ in views] == ["main", "sub_1"]
    assert [account for account, _ in night] == ["main", "main", "sub_1", "sub_1", "main", "sub_1"]
    with dg.instance_for_test() as instance:
        said = materialize(found, views[0][1], instance, console=Console(quiet=True), title="")
    assert not said.success
    assert cause_of(said) == (
        "1 holding(s) of main moved by other than the flows its records tell (residual = "
        "closing - opening - flows): USDT 2024-03-01 .. 2024-03-02: -1 (opening 1000, flows 0, "
        "closing 999; no record of this amount)"
    )
