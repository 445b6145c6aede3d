"""Alerts for an unattended service: a failed run, or a failed blocking check, posts one message
to a webhook (Slack-compatible: ``{"text": ...}``).

The webhook's URL is the settings' ``WHITEBIT_ALERT_WEBHOOK_URL``; without it no sensor is defined,
so nothing runs and nothing is posted. With ``WHITEBIT_UI_URL`` (the webserver's public address) the
message links to the run. Each failed run gets one message: the check sensor reports the runs in
which a blocking check failed, the run-failure sensor every other failed run.

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
from assets.reporting import ACCOUNT_TAG
from assets.settings import Settings

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


def _failed_evaluation(entry: dg.EventLogEntry) -> dg.AssetCheckEvaluation | None:
    data = entry.dagster_event.event_specific_data if entry.dagster_event else None
    return data if isinstance(data, dg.AssetCheckEvaluation) and not data.passed else None


def _failed_evaluations(instance: dg.DagsterInstance, run_id: str) -> list[dg.AssetCheckEvaluation]:
    entries = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return [e for e in map(_failed_evaluation, entries) if e is not None]


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
    return any(e.blocking for e in _failed_evaluations(instance, run_id))


def _check_failures_after(instance: dg.DagsterInstance, cursor: int) -> tuple[list[str], int]:
    """Runs with a failed blocking check evaluation recorded after ``cursor``, and the new
    cursor."""
    records = instance.get_event_records(
        dg.EventRecordsFilter(
            event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION, after_cursor=cursor
        ),
        ascending=True,
        limit=1000,
    )
    runs: dict[str, None] = {}
    for record in records:
        cursor = max(cursor, record.storage_id)
        evaluation = _failed_evaluation(record.event_log_entry)
        if evaluation is not None and evaluation.blocking:
            runs[record.event_log_entry.run_id] = None
    return list(runs), cursor


def _latest_storage_id(instance: dg.DagsterInstance) -> int:
    records = instance.get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION),
        ascending=False,
        limit=1,
    )
    return records[0].storage_id if records else 0


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
        description="Posts a run whose blocking check failed to the webhook.",
    )
    def alert_on_blocking_check_failure(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        instance = context.instance
        if context.cursor is None:
            # Like a run-failure sensor, it starts from now: no alerts for what failed before.
            context.update_cursor(str(_latest_storage_id(instance)))
            return dg.SkipReason("started: watching check evaluations from now on")
        run_ids, cursor = _check_failures_after(instance, int(context.cursor))
        for run_id in run_ids:
            run = instance.get_run_by_id(run_id)
            if run is not None:
                alerts.post(message(instance, run, alerts))
        context.update_cursor(str(cursor))
        return dg.SkipReason(f"{len(run_ids)} run(s) with a failed blocking check posted")

    return [alert_on_run_failure, alert_on_blocking_check_failure]
