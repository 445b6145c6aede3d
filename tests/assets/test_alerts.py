"""The alert sensors exist only with a webhook; an alert names the job, the partition, the failed
step and its reason, links to the run, and carries no secret."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets import alerts


def test_no_sensor_without_a_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(alerts.WEBHOOK_ENV, raising=False)
    assert alerts.sensors() == []
    monkeypatch.setenv(alerts.WEBHOOK_ENV, "http://127.0.0.1:9/hook")
    assert {s.name for s in alerts.sensors()} == {
        "alert_on_run_failure",
        "alert_on_blocking_check_failure",
    }


DAYS = dg.DailyPartitionsDefinition(start_date="2026-01-01")


@dg.asset(partitions_def=DAYS)
def walked() -> None:
    raise dg.Failure(description="the exchange refused key-123 / secret-456: 401\nsecond line")


def test_the_message_names_what_failed_and_why_without_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WHITEBIT_API_KEY", "key-123")
    monkeypatch.setenv("WHITEBIT_API_SECRET", "secret-456")
    monkeypatch.setenv(alerts.UI_URL_ENV, "https://dagster.example.test/")
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [walked],
            instance=instance,
            partition_key="2026-03-04",
            raise_on_error=False,
            tags={"whitebit/account": "sub_1"},  # as the schedule tags each account's runs
        )
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        text = alerts.message(instance, run)
    assert (
        "job __ephemeral_asset_job__ failed (account sub_1, partition 2026-03-04, status FAILURE)"
        in text
    )
    assert "failed step walked: the exchange refused" in text
    assert "401 / second line" in text
    assert f"https://dagster.example.test/runs/{result.run_id}" in text
    assert "key-123" not in text
    assert "secret-456" not in text


@dg.asset
def refused() -> None:
    raise dg.Failure(
        description="refused main-key-789 with secret main-secret-012 at postgres://u:pw@db/x"
    )


def test_the_message_carries_no_key_of_an_account_of_the_accounts_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An accounts file names the variables holding each account's key and secret: their values
    are scrubbed as the single-account ones are, and so is the database URL."""
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(
        "accounts:\n  - name: main\n    api_key_env: MAIN_KEY\n    api_secret_env: MAIN_SECRET\n"
    )
    monkeypatch.setenv("WHITEBIT_ACCOUNTS_FILE", str(accounts))
    monkeypatch.setenv("MAIN_KEY", "main-key-789")
    monkeypatch.setenv("MAIN_SECRET", "main-secret-012")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", "postgres://u:pw@db/x")
    with dg.instance_for_test() as instance:
        result = dg.materialize([refused], instance=instance, raise_on_error=False)
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        text = alerts.message(instance, run)
    assert "failed step refused: refused <MAIN_KEY> with secret <MAIN_SECRET> at " in text
    assert "<DAGSTER_POSTGRES_URL>" in text
    for secret in ("main-key-789", "main-secret-012", "pw@db"):
        assert secret not in text
