"""Alerts for an unattended service: a failed run, or a failed blocking check, posts one message
to a webhook (Slack-compatible: ``{"text": ...}``). What is lost is a failed blocking check: days
past the exchange's six months never archived (`assets.horizon`), and a residual of the
reconciliation (``balances_reconcile``); a blocking check that only warns (days still at stake)
posts nothing.

The webhook's URL is the settings' ``WHITEBIT_ALERT_WEBHOOK_URL``; without it no sensor is defined,
so nothing runs and nothing is posted. With ``WHITEBIT_UI_URL`` (the webserver's public address) the
message links to the run. Each failed run gets one message: the check sensor reports the runs in
which a blocking check failed with severity error, whoever launched them (the command line's runs
too), the run-failure sensor every other failed run of the code location.

The message names the job, the partition(s), each failed step or check and its reason. Neither
the webhook URL (itself a credential) nor an API key or secret (of any account), a database
URL or an AWS secret ever appears in a message or log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import dagster as dg
import httpx

from assets.accounts import Account
from assets.outcomes import outcome
from assets.settings import Settings
from assets.steps import ACCOUNT_TAG

#: Settings whose values a message must never carry, should an error text hold one; with the
#: variables the accounts name for each account's key and secret.
_SECRET_VARIABLES: Final = (
    "WHITEBIT_API_KEY",
    "WHITEBIT_API_SECRET",
    "WHITEBIT_ALERT_WEBHOOK_URL",
    "DAGSTER_POSTGRES_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
#: How often the sensors look: a failed night reaches the webhook within a minute.
INTERVAL_S: Final = 15
_REASON_LINES: Final = 3
_REASON_CHARS: Final = 400


def _one_line(text: str) -> str:
    """A reason on the message's one line: its first lines, joined."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()][:_REASON_LINES]
    short = " / ".join(lines)
    return short if len(short) <= _REASON_CHARS else short[: _REASON_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class Alerts:
    """Where alerts go, where they link to, and the values they must never carry."""

    webhook_url: str
    ui_url: str | None
    #: (variable, value) of every secret setting that is set.
    secrets: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, settings: Settings, accounts: Sequence[Account]) -> Alerts | None:
        if settings.alert_webhook_url is None:
            return None
        names = [*_SECRET_VARIABLES]
        names += [v for a in accounts for v in (a.key_env, a.secret_env) if v is not None]
        secrets = tuple(
            (name, settings.environ[name]) for name in names if settings.environ.get(name)
        )
        return cls(settings.alert_webhook_url.get_secret_value(), settings.ui_url, secrets)

    def scrubbed(self, text: str) -> str:
        for name, value in self.secrets:
            text = text.replace(value, f"<{name}>")
        return text

    def post(self, text: str) -> None:
        """Post ``{"text": text}`` to the webhook; a refusal raises, naming only its status, so
        the sensor's tick fails and the next one tries again."""
        try:
            answer = httpx.post(self.webhook_url, json={"text": text}, timeout=10)
        except httpx.HTTPError as exc:
            raise RuntimeError(f"the alert webhook did not answer ({type(exc).__name__})") from None
        if answer.status_code >= 300:
            raise RuntimeError(f"the alert webhook answered {answer.status_code}")


def _partitions(run: dg.DagsterRun) -> str:
    """``partition 2026-11, `` (or a range), or nothing for a run of unpartitioned assets."""
    tags = run.tags
    if "dagster/partition" in tags:
        return f"partition {tags['dagster/partition']}, "
    start, end = (
        tags.get("dagster/asset_partition_range_start"),
        tags.get("dagster/asset_partition_range_end"),
    )
    return f"partitions {start} .. {end}, " if start and end else ""


def _failed_blocking(entry: dg.EventLogEntry) -> bool:
    """Whether the entry is a blocking check's evaluation that failed the run: an error (a
    warning fails nothing)."""
    data = entry.dagster_event.event_specific_data if entry.dagster_event else None
    return (
        isinstance(data, dg.AssetCheckEvaluation)
        and not data.passed
        and bool(data.blocking)
        and data.severity == dg.AssetCheckSeverity.ERROR
    )


def message(
    instance: dg.DagsterInstance, run: dg.DagsterRun, alerts: Alerts, fallback: str = ""
) -> str:
    """The alert for a run: job, partition(s), what failed and why, and a link."""
    account = run.tags.get(ACCOUNT_TAG)
    lines = [
        f"whitebit-etl: run of job {run.job_name} failed "
        f"({f'account {account}, ' if account else ''}{_partitions(run)}"
        f"status {run.status.value})"
    ]
    # What failed, as the command line says it after a run: one account of a run's failures.
    said = outcome(instance, run.run_id, success=False).said
    lines += [f"failed {s.what}: {_one_line(s.text)}" for s in said if not s.warns]
    if len(lines) == 1 and fallback:
        lines.append(f"reason: {_one_line(fallback)}")
    ui = alerts.ui_url
    lines.append(f"run {run.run_id}" + (f": {ui.rstrip('/')}/runs/{run.run_id}" if ui else ""))
    return alerts.scrubbed("\n".join(lines))


def _has_failed_blocking_check(instance: dg.DagsterInstance, run_id: str) -> bool:
    entries = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return any(map(_failed_blocking, entries))


def _failed_runs(
    instance: dg.DagsterInstance, cursor: str | None, limit: int = 1000
) -> tuple[list[str], str]:
    """The runs that failed after ``cursor`` (oldest first; with no cursor, the newest only), of
    any job and launched from anywhere, and the new cursor. Run failures are read from the event
    log's index, which every storage keeps across runs (SQLite's too)."""
    found = instance.fetch_run_status_changes(
        dg.DagsterEventType.RUN_FAILURE, limit=limit, cursor=cursor, ascending=cursor is not None
    )
    return [record.event_log_entry.run_id for record in found.records], found.cursor


def sensors(settings: Settings, accounts: Sequence[Account]) -> list[dg.SensorDefinition]:
    """The alert sensors, or none when no webhook is configured."""
    alerts = Alerts.of(settings, accounts)
    if alerts is None:
        return []

    @dg.run_failure_sensor(
        name="alert_on_run_failure",
        minimum_interval_seconds=INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Posts a failed run to the webhook (not one whose blocking check failed: "
        "alert_on_blocking_check_failure posts those).",
    )
    def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        if _has_failed_blocking_check(context.instance, run.run_id):
            return
        alerts.post(message(context.instance, run, alerts, context.failure_event.message or ""))

    @dg.sensor(
        name="alert_on_blocking_check_failure",
        minimum_interval_seconds=INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Posts a run a blocking check failed (days lost to the exchange's six "
        "months, a residual, rejected records) to the webhook, whoever launched it.",
    )
    def alert_on_blocking_check_failure(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        instance = context.instance
        if context.cursor is None:
            # Like a run-failure sensor, it starts from now: no alerts for what failed before.
            context.update_cursor(_failed_runs(instance, None, limit=1)[1])
            return dg.SkipReason("started: watching failed runs from now on")
        run_ids, cursor = _failed_runs(instance, context.cursor)
        posted = 0
        for run_id in run_ids:
            run = instance.get_run_by_id(run_id)
            if run is not None and _has_failed_blocking_check(instance, run_id):
                alerts.post(message(instance, run, alerts))
                posted += 1
        context.update_cursor(cursor)
        return dg.SkipReason(f"{posted} run(s) with a failed blocking check posted")

    return [alert_on_run_failure, alert_on_blocking_check_failure]
