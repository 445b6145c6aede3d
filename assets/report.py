"""The report page as an asset (``account_report``), the sensor that rewrites it after the
accounts' runs, and what the Dagster instance tells the page (`run_facts`).

``account_report`` is downstream of every account's tables and writes `warehouse.report`'s page of
every account to ``report.html`` in the warehouse's root (`warehouse.report.publish`: on S3 too,
so that a run on any machine leaves it where the team finds it), with its path and headline
numbers as metadata (the UI links to the file and plots the numbers over time). The nightly
schedule's runs are one per account and kind, in parallel, so no run of them is "the last": the
sensor ``report_after_runs`` asks for a report run once an account's table was materialized after
the latest report and no other run is queued or going. A night of several accounts gives one report
(or a few, when its runs end far apart), each holding everything landed so far.
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

import dagster as dg
from dagster import AssetExecutionContext

from warehouse import display, report
from warehouse.report import Report, RunFacts

from .jobs import AccountAssets
from .resources import WarehouseResource
from .steps import ACCOUNT_TAG

REPORT_KEY: Final = dg.AssetKey("account_report")
#: The tag Dagster gives the runs a schedule launched.
SCHEDULE_TAG: Final = "dagster/schedule_name"
NIGHTLY_SCHEDULE: Final = "nightly_schedule"
#: A run that ended without landing all it planned.
ENDED_SHORT: Final = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
UNFINISHED: Final = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _ended(instance: dg.DagsterInstance, tags: dict[str, str]) -> datetime | None:
    records = instance.get_run_records(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], tags=tags), limit=1
    )
    if not records or records[0].end_time is None:
        return None
    return datetime.fromtimestamp(records[0].end_time, UTC).replace(microsecond=0)


def _failed(instance: dg.DagsterInstance, key: dg.AssetKey, landed: str | None) -> datetime | None:
    """When the latest run that planned the table ended, if it failed (or was canceled) before
    landing it: the latest materialization is another run's, or there is none."""
    planned = instance.get_latest_planned_materialization_info(key)
    if planned is None or planned.run_id == landed:
        return None
    record = instance.get_run_record_by_id(planned.run_id)
    if record is None or record.dagster_run.status not in ENDED_SHORT:
        return None
    ended = record.end_time or record.create_timestamp.timestamp()
    return datetime.fromtimestamp(ended, UTC).replace(microsecond=0)


def run_facts(instance: dg.DagsterInstance, built: Sequence[AccountAssets]) -> RunFacts:
    """Each account's last successful night and the last time one of its tables landed (by any
    run: the schedule's, a backfill, the UI's, the command line's), the fields its tables'
    latest materializations saw that the spec does not name, and the tables whose latest run
    failed before landing them."""
    nights, landed, drift, failed = {}, {}, {}, {}
    for assets in built:
        name = assets.account.name
        if night := _ended(instance, {ACCOUNT_TAG: name, SCHEDULE_TAG: NIGHTLY_SCHEDULE}):
            nights[name] = night
        seen, times, short = [], [], {}
        for key in (key for asset in assets.assets for key in asset.keys):
            event = instance.get_latest_materialization_event(key)
            if ended := _failed(instance, key, event.run_id if event else None):
                short[key.path[-1]] = ended
            if event is None or event.asset_materialization is None:
                continue
            times.append(event.timestamp)
            unknown = event.asset_materialization.metadata.get("unknown_fields")
            fields = unknown.value if isinstance(unknown, dg.JsonMetadataValue) else None
            if isinstance(fields, dict):
                table = key.path[-1]
                seen += [f"{table}: {field} ({kind})" for field, kind in sorted(fields.items())]
        if times:
            landed[name] = datetime.fromtimestamp(max(times), UTC).replace(microsecond=0)
        if seen:
            drift[name] = tuple(seen)
        if short:
            failed[name] = short
    return RunFacts(last_night=nights, last_landed=landed, drift=drift, failed=failed)


def metadata(written: Report, shared: str) -> dict[str, dg.MetadataValue]:
    """Where the page is for everyone, and its headline numbers; the amounts as floats too, for
    the UI's plots."""
    headline = written.headline
    return {
        "path": dg.MetadataValue.path(shared),
        "accounts": dg.MetadataValue.text(", ".join(headline.accounts)),
        "range": dg.MetadataValue.text(f"{headline.first_day} .. {headline.last_day}"),
        "rows": dg.MetadataValue.int(headline.rows),
        "funding_payments": dg.MetadataValue.int(headline.funding_payments),
        "funding_net": dg.MetadataValue.float(float(headline.funding_net)),
        "funding_net_exact": dg.MetadataValue.text(display.text(headline.funding_net)),
        "rejected_records": dg.MetadataValue.int(headline.rejected_records),
        "active_investments": dg.MetadataValue.int(headline.active_investments),
        "bytes": dg.MetadataValue.int(len(written.html.encode())),
    }


def report_asset(built: Sequence[AccountAssets]) -> dg.AssetsDefinition:
    """``account_report``: the page of every account of the deployment."""
    names = [assets.account.name for assets in built]

    @dg.asset(
        key=REPORT_KEY,
        deps=[key for assets in built for asset in assets.assets for key in asset.keys],
        group_name="report",
        description="One self-contained HTML page of every account's funding, balances and "
        "investments, charts beside exact tables (whitebit-etl report writes the same).",
        kinds={"html"},
    )
    def account_report(
        context: AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        facts = run_facts(context.instance, built)
        written, shared = report.publish(warehouse.warehouse, declared=names, facts=facts)
        context.log.info(f"report written to {shared}")
        return dg.MaterializeResult(metadata=metadata(written, shared))

    return account_report


def report_sensor(
    built: Sequence[AccountAssets], job: "dg.UnresolvedAssetJobDefinition"
) -> dg.SensorDefinition:
    keys = [key for assets in built for asset in assets.assets for key in asset.keys]

    @dg.sensor(
        job=job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Asks for the account report once an account's table was materialized after "
        "the latest report and no other run is queued or going.",
    )
    def report_after_runs(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        return dg.SensorResult(run_requests=report_requests(context.instance, keys, job.name))

    return report_after_runs


def report_requests(
    instance: dg.DagsterInstance, keys: Sequence[dg.AssetKey], report_job: str
) -> list[dg.RunRequest]:
    """A report run when a table changed after the latest report and no run but a report's is
    queued or going (runs launched from the UI carry no account tag: any run may write)."""
    last = instance.get_latest_materialization_event(REPORT_KEY)
    since = last.timestamp if last else 0.0
    changed = [
        event.timestamp
        for key in keys
        if (event := instance.get_latest_materialization_event(key)) and event.timestamp > since
    ]
    if not changed:
        return []
    going = instance.get_runs(dg.RunsFilter(statuses=UNFINISHED))
    if any(run.job_name != report_job for run in going):
        return []
    # The run key names the change: the ticks that see the same one ask once.
    return [dg.RunRequest(run_key=f"report-after:{max(changed)}")]
