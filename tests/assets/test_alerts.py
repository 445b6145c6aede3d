"""The alert sensors exist only with a webhook; an alert names the job, the partition, the failed
step and its reason, links to the run, and carries no secret."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets import alerts
from assets.accounts import load
from assets.settings import Settings

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
        description="refused main-key-789 with secret main-secret-012 at postgres://u:pw@db/x"
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
            "DAGSTER_POSTGRES_URL": "postgres://u:pw@db/x",
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
