"""`make bench`, the end-to-end section: a funding-history backfill of the large scale (over a
million rows), ours against the peers, side by side in one run.

Each contender runs in a process of its own (with the processes it starts), one after another,
on the whole machine: both cores, shared with the simulator, as a backfill on this machine would
run. Its wall time is its own, and its peak memory is the sum of the peaks of its processes (ours
normalizes and writes in a second process; dlt's run is one process):

- ours, the pipeline alone: the code a `funding_history` run executes (the walk streamed month by
  month into Parquet partitions, the DuckDB catalog refreshed, the checks), without an
  orchestrator, like dlt, which is a library too;
- ours through Dagster: one single-run backfill of the months with an on-disk instance, as the
  CLI and the UI run it (Dagster adds two events per partition to its event log); and the same on
  an instance stored in PostgreSQL (a server of the run's own, `tests.support.postgres`), as the
  nightly service runs;
- dlt 1.31's REST API source (`bench.dlt_peer`), Parquet loader (its fastest) and DuckDB;
- a plain sequential `httpx.Client` loop that only fetches the pages (no storage at all).

Then ours again under the spec's budgets (alone and through Dagster), ours over ~100,000 rows
(memory should barely grow with the range: walks stream a month at a time), and the investments
history, where dlt's offset paginator stops at the offset window without a word. The warehouse
the pipeline alone filled is then measured for its layout (`bench.warehouse.layout`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import dagster as dg
import psutil

from assets.instance import POSTGRES_URL_ENV
from bench import Figure
from bench.report import page
from bench.warehouse import layout
from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SpawnedSimulator, spawn

SECTION: Final = "backfill"
FROZEN_AT: Final = EPOCH  # 2026-09-21: the simulator's data clock
#: Days of the ~100,000-row backfill (the large scale funds ~753 payments a day).
SMALL_DAYS: Final = 133


def _history_days() -> tuple[date, date]:
    """First and last day of the large scale's funding history."""
    last = datetime.fromtimestamp(FROZEN_AT, UTC).date()
    return last - timedelta(days=Scale.large().days), last


def _high_water_mb(pid: int) -> float:
    """A process's peak resident memory so far, its own: ``getrusage``'s would not do, as a
    process started by exec keeps its parent's peak until then as its own (a writer host's
    figure was its parent's memory when it started it)."""
    with contextlib.suppress(OSError), Path(f"/proc/{pid}/status").open() as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Peaks(threading.Thread):
    """The peak memory of a process and of each of its descendants, read every 50 ms until
    `stop`."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="peaks", daemon=True)
        self.pid, self.mb = pid, dict[int, float]()
        self._stopped = threading.Event()

    def run(self) -> None:
        root = psutil.Process(self.pid)
        while not self._stopped.wait(0.05):
            with contextlib.suppress(psutil.Error):
                for pid in [self.pid, *(p.pid for p in root.children(recursive=True))]:
                    self.mb[pid] = max(self.mb.get(pid, 0.0), _high_water_mb(pid))

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _child(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], float, float]:
    """Run ``python -m <args>``: (its JSON line, seconds, peak memory in MB of it and of the
    largest of its descendants, summed: ours, the walk's process and its writer's)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(  # noqa: S603 - our interpreter, our modules, no shell
            [sys.executable, "-m", *args], stdout=out, stderr=err, env=env, text=True
        )
        peaks = _Peaks(process.pid)
        peaks.start()
        process.wait()
        seconds = time.perf_counter() - started
        peaks.stop()
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} failed ({process.returncode}):\n{err.read()[-3000:]}"
            )
        line = next(ln for ln in reversed(out.read().splitlines()) if ln.startswith("{"))
    result = json.loads(line)
    # Its own as it said it at its end, when it does (its last moments may fall between reads).
    own = max(peaks.mb.pop(process.pid, 0.0), float(result.get("peak_mb", 0)))
    return result, seconds, own + max(peaks.mb.values(), default=0.0)


def _env(sim: SpawnedSimulator, first: date) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHITEBIT_", "DAGSTER_"))}
    return env | {
        "WHITEBIT_START_DATE": first.isoformat(),
        "PYTHONUNBUFFERED": "1",
    }


def _ours(
    sim: SpawnedSimulator,
    first: date,
    last: date,
    root: Path | str,
    *,
    dagster: bool,
    paced: bool = False,
    postgres_url: str | None = None,
    extra_env: dict[str, str] | None = None,
    history: str = "funding_history",
    home: Path | None = None,
    noop: bool = False,
) -> tuple[dict[str, Any], float, float]:
    """Ours in a child process, into ``root`` (a directory, or an ``s3://`` URL with the store's
    AWS variables and the catalog's file in ``extra_env``): the backfill of ``history``; through
    Dagster, on an instance made in the run's own temporary home or in ``home``, made once
    (``noop``: a run of the history's twin that does nothing)."""
    flags = [*(["--dagster"] if dagster else []), *(["--paced"] if paced else [])]
    flags += ["--noop"] if noop else []
    flags += ["--history", history, *(["--home", str(home)] if home else [])]
    env = _env(sim, first) | (extra_env or {})
    if postgres_url:  # in the environment, as the service reads it, not in a command line
        flags.append("--postgres")
        env[POSTGRES_URL_ENV] = postgres_url
    return _child(
        ["bench.backfill", "ours", "--url", sim.url, "--api-key", sim.credentials.api_key,
         "--api-secret", sim.credentials.api_secret, "--first", first.isoformat(),
         "--last", last.isoformat(), "--root", str(root), *flags],
        env,
    )  # fmt: skip


def run() -> list[Figure]:
    # Here, not at the top: the children import this module, and its imports (the service's,
    # Redis's client) would count in their memory.
    from tests.support.postgres import LocalPostgres

    first, last = _history_days()
    small_first = last - timedelta(days=SMALL_DAYS - 1)
    sim = spawn(scale="large", frozen_at=FROZEN_AT)
    with sim, tempfile.TemporaryDirectory() as scratch, LocalPostgres() as postgres:
        base = Path(scratch)
        sim.control("limits", enabled=False)
        creds = ["--url", sim.url, "--api-key", sim.credentials.api_key,
                 "--api-secret", sim.credentials.api_secret]  # fmt: skip
        env = _env(sim, first)

        def dlt(resource: str, destination: str) -> tuple[dict[str, Any], float, float]:
            out = base / f"dlt-{resource}-{destination}"
            # Our client's window nonces run up to 4 s ahead of the clock; dlt's are the clock's
            # milliseconds, and it retries a refused one as it was: let our last ones expire.
            time.sleep(spec.NONCE_WINDOW_MS / 1000)
            return _child(
                ["bench.dlt_peer", *creds, "--resource", resource, "--destination", destination,
                 "--out", str(out)],
                env,
            )  # fmt: skip

        plain, plain_s, plain_mb = _child(["bench.backfill", "plain", *creds], env)
        truth = int(plain["rows"])
        core, core_s, core_mb = _ours(sim, first, last, base / "core", dagster=False)
        dag, dag_s, dag_mb = _ours(sim, first, last, base / "dagster", dagster=True)
        pg, pg_s, pg_mb = _ours(
            sim, first, last, base / "dagster-pg", dagster=True,
            postgres_url=postgres.url(postgres.new_database()),
        )  # fmt: skip
        dlt_pq, dlt_pq_s, dlt_pq_mb = dlt("funding_history", "parquet")
        dlt_db, dlt_db_s, dlt_db_mb = dlt("funding_history", "duckdb")
        small_core, _, small_core_mb = _ours(sim, small_first, last, base / "c100k", dagster=False)
        small_run, _, small_run_mb = _ours(sim, small_first, last, base / "d100k", dagster=True)
        sim.control("limits", enabled=True)
        paced_core, paced_core_s, _ = _ours(
            sim, first, last, base / "paced-core", dagster=False, paced=True
        )
        paced, paced_s, _ = _ours(sim, first, last, base / "paced", dagster=True, paced=True)
        sim.control("limits", enabled=False)
        invest, _, _ = _child(
            ["bench.backfill", "investments", *creds, "--root", str(base / "inv")], env
        )
        dlt_inv, _, _ = dlt("investments", "parquet")
        layout_figures = layout(base / "core")
        report_figures = page(base / "core")

    def complete(rows: int) -> str:
        return "complete" if rows == truth else f"INCOMPLETE: {rows:,} of {truth:,}"

    core_rate, dag_rate = core["rows"] / core_s, dag["rows"] / dag_s
    dlt_rate = dlt_pq["rows"] / dlt_pq_s
    budget = 1000.0  # funding history: 10,000 requests / 10 s
    return [
        Figure(SECTION, f"funding backfill, {truth:,} rows, Parquet + DuckDB: ours, the "
               "pipeline alone (walk, normalize, partitions, catalog, checks)", core_rate,
               "rows/s", dlt_rate, "dlt REST API source, Parquet loader",
               f"ours {core_s:.1f} s, {complete(core['rows'])}, peak {core_mb:.0f} MB; dlt "
               f"{dlt_pq_s:.1f} s, {complete(dlt_pq['rows'])}, peak {dlt_pq_mb:.0f} MB, "
               "epoch strings left as text"),
        Figure(SECTION, "  the same, ours through Dagster (one run, on-disk instance as "
               "`whitebit-etl materialize` and `make ui` use)", dag_rate, "rows/s", dlt_rate,
               "dlt REST API source, Parquet loader",
               f"{dag_s:.1f} s, {complete(dag['rows'])}, peak {dag_mb:.0f} MB; "
               f"{dag['partitions']} partitions: Dagster records two events per partition"),
        Figure(SECTION, "  ours through Dagster against the pipeline alone", dag_rate, "rows/s",
               core_rate, "ours, the pipeline alone",
               f"{dag_s:.1f} s against {core_s:.1f} s: what the orchestrator costs"),
        Figure(SECTION, "  the same, ours through Dagster on a PostgreSQL-stored instance (as "
               "`whitebit-etl serve` runs it)", pg["rows"] / pg_s, "rows/s", dlt_rate,
               "dlt REST API source, Parquet loader",
               f"{pg_s:.1f} s, {complete(pg['rows'])}, peak {pg_mb:.0f} MB (ours; the server's "
               f"own not counted); on SQLite {dag_s:.1f} s"),
        Figure(SECTION, "  ours alone against dlt REST API source, DuckDB", core_rate, "rows/s",
               dlt_db["rows"] / dlt_db_s, "dlt, DuckDB (Parquet loader)",
               f"dlt {dlt_db_s:.1f} s; {complete(dlt_db['rows'])}; peak {dlt_db_mb:.0f} MB"),
        Figure(SECTION, "  ours alone against a plain sequential httpx loop that only fetches",
               core_rate, "rows/s", truth / plain_s, "httpx.Client loop, no storage",
               f"loop {plain_s:.1f} s, peak {plain_mb:.0f} MB: the fetching alone"),
        Figure(SECTION, "peak memory, ours alone: 1,052,100 rows against ~100,000 rows",
               core_mb, "MB", small_core_mb, f"ours alone, {small_core['rows']:,} rows",
               "lower is better: walks stream a month at a time; the walk's process and the "
               "writer's, summed"),
        Figure(SECTION, "peak memory, ours through Dagster: 1,052,100 rows against ~100,000",
               dag_mb, "MB", small_run_mb, f"through Dagster, {small_run['rows']:,} rows",
               "lower is better; both processes, summed"),
        Figure(SECTION, "funding backfill under the spec's budgets, pipeline alone: walk pages/s",
               paced_core["pages_per_s"], "pages/s", budget, "budget 10,000 requests / 10 s",
               f"{paced_core['pages_per_s'] / budget:.1%} of the budget while walking; "
               f"{paced_core['rate_limited']} answers 429; end to end "
               f"{paced_core['rows'] / paced_core_s:,.0f} rows/s"),
        Figure(SECTION, "  the same through Dagster: walk pages/s",
               paced["pages_per_s"], "pages/s", budget, "budget 10,000 requests / 10 s",
               f"{paced['pages_per_s'] / budget:.1%} of the budget while walking; "
               f"{paced['rate_limited']} answers 429; end to end {paced['rows'] / paced_s:,.0f} "
               "rows/s through Dagster"),
        Figure(SECTION, "investments, status 1 (active): rows extracted", invest["active"],
               "rows", dlt_inv["rows"], "dlt, offset paginator",
               f"on the exchange: {invest['active']:,}; ours "
               f"{'complete' if invest['complete'] else 'INCOMPLETE'} ({invest['slices']} "
               "slices); dlt stops at the offset window with exit 0 and no warning"),
        *layout_figures,
        *report_figures,
    ]  # fmt: skip


# --- The children ---------------------------------------------------------------------------


#: The account the figures' runs extract as: the one of the single-account variables.
ACCOUNT: Final = "default"


def _account_assets() -> Any:
    """The account's assets, as the code location builds them for the single-account
    variables."""
    import os

    from assets.accounts import Account
    from assets.jobs import AccountAssets
    from assets.partitions import monthly
    from assets.settings import KEY_ENV, SECRET_ENV
    from pipeline import spec

    account = Account(
        name=ACCOUNT,
        base_url=spec.GLOBAL_BASE_URL,
        key_env=KEY_ENV,
        secret_env=SECRET_ENV,
        mining_accounts=(),
        markets=None,
        investments=True,
    )
    return AccountAssets.of(account, monthly(date(2020, 1, 1)), dict(os.environ), spec.WALL_CLOCK)


def _ours_child(args: argparse.Namespace) -> dict[str, Any]:
    import dagster as dg

    from assets.resources import WarehouseResource, WhiteBITResource
    from assets.runs import QUIET
    from warehouse import WarehouseConfig
    from warehouse.schemas import month_of

    # The simulator's budgets are off for the unthrottled comparison: ours must not pace either.
    whitebit = WhiteBITResource(
        api_key=args.api_key, api_secret=args.api_secret, base_url=args.url, paced=args.paced
    )
    first, last = date.fromisoformat(args.first), date.fromisoformat(args.last)
    if not args.dagster:
        return _pipeline_alone(whitebit, args.root, first, last, args.history)
    # As `whitebit-etl materialize --from --to` asks: the months, narrowed to the days.
    tags = {
        "dagster/asset_partition_range_start": month_of(first),
        "dagster/asset_partition_range_end": month_of(last),
    }
    days = {"first_day": args.first, "last_day": args.last}
    funding = _account_assets().tables[args.history]
    run_config = {**QUIET, "ops": {funding.node_def.name: {"config": days}}}
    if args.noop:
        funding, run_config = _noop_twin(funding), QUIET
    resources = {
        f"whitebit_{ACCOUNT}": whitebit,
        "warehouse": WarehouseResource.of(WarehouseConfig(args.root)),
    }
    # The instance's storage: SQLite files in the home given or a temporary one, or the
    # PostgreSQL database given.
    storage = {"storage": {"postgres": {"postgres_url": {"env": POSTGRES_URL_ENV}}}}
    with contextlib.ExitStack() as stack:
        home = args.home or stack.enter_context(tempfile.TemporaryDirectory())
        Path(home).mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        instance = stack.enter_context(
            dg.instance_for_test(temp_dir=home, overrides=storage if args.postgres else None)
        )
        result = dg.materialize(
            [funding], resources=resources, tags=tags, instance=instance,
            run_config=run_config,
        )  # fmt: skip
        run_s = time.perf_counter() - started
    materialized = result.asset_materializations_for_node(funding.node_def.name)
    if args.noop:
        return {"run_s": run_s, "partitions": len(materialized)}
    meta = materialized[0].metadata
    pages, walk_s = meta["pages_fetched"].value, meta["walk_seconds"].value
    return {
        "rows": _rows_in_duckdb(args.root, args.history),
        "partitions": len(materialized),
        "pages": pages,
        "walk_s": walk_s,
        "pages_per_s": float(pages) / float(walk_s),  # type: ignore[arg-type]
        "rate_limited": meta["rate_limited_answers"].value,
    }


def _noop_twin(asset: Any) -> Any:
    """An asset of ``asset``'s key, partitions and checks that reads and writes nothing: a run of
    it costs only what Dagster adds to every run (its instance opened, the run recorded, its
    events written)."""
    specs = list(asset.check_specs)

    @dg.asset(
        key=asset.key,
        partitions_def=asset.partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        check_specs=specs,
    )
    def twin() -> dg.MaterializeResult:  # type: ignore[type-arg]
        passed = [dg.AssetCheckResult(check_name=spec.name, passed=True) for spec in specs]
        return dg.MaterializeResult(check_results=passed)

    return twin


def _pipeline_alone(
    whitebit: Any, root: str, first: date, last: date, table: str = "funding_history"
) -> dict[str, Any]:
    """What the asset does, without the orchestrator: the walk streamed into partitions, the
    catalog refreshed, the checks run. Its seconds from the walk's start to the checks' end
    (``backfill_s``), and the CPU seconds each of our processes spent meanwhile: this one's
    (``backfill_cpu_s``, every thread), and the writer's (``writer_cpu_s``: the writers' host
    and the writer it forked and reaped)."""
    import asyncio
    import logging
    import os

    import dagster as dg

    from assets import checks
    from assets.loading import load_monthly
    from assets.partitions import day_range
    from pipeline import spec
    from warehouse import Warehouse, catalog, partitions
    from warehouse.monthly import MonthlyTarget

    days = day_range(first, last + timedelta(days=1))
    wh = Warehouse.open(root)
    started, own_cpu, writer_cpu = time.perf_counter(), time.process_time(), _writer_cpu()
    with whitebit.exchange(
        logging.getLogger(__name__), simulator_day=spec.WALL_CLOCK.today()
    ) as exchange:

        async def walk() -> Any:
            async with exchange.client() as client:
                target = MonthlyTarget(
                    wh,
                    spec.HISTORIES[table],
                    account=ACCOUNT,
                    days=days,
                    extracted_at=datetime.now(UTC),
                )
                return await load_monthly(
                    client, target, source=exchange.source, environ=dict(os.environ)
                )

        cpu = time.process_time()
        load = asyncio.run(walk())
        cpu = time.process_time() - cpu
    catalog.refresh(wh)
    results = checks.for_written(
        wh,
        load.written,
        load.stats.rows,
        load.stats.unknown_fields,
        key=dg.AssetKey([ACCOUNT, table]),
        out_of_reach=[str(e) for e in load.stats.incomplete_slices],
    )
    if not all(r.passed for r in results):
        raise RuntimeError(f"checks failed: {results}")
    backfill_s = time.perf_counter() - started
    own_cpu, writer_cpu = time.process_time() - own_cpu, _writer_cpu() - writer_cpu
    return {
        "rows": _rows_in_duckdb(root, table),
        "partitions": len(partitions.partition_files(wh.store, table)),
        "pages": load.stats.pages,
        "walk_s": load.stats.elapsed_s,
        "pages_per_s": load.stats.pages / load.stats.elapsed_s,
        "rate_limited": load.stats.rate_limited,
        "walk_cpu_s": cpu,
        "backfill_s": backfill_s,
        "backfill_cpu_s": own_cpu,
        "writer_cpu_s": writer_cpu,
    }


def _writer_cpu() -> float:
    """CPU seconds of the writers' host so far, with the writers it reaped (0: none started)."""
    import psutil

    from warehouse import writer

    host = writer._HOST
    if host is None:
        return 0.0
    cpu = psutil.Process(host.pid).cpu_times()
    return cpu.user + cpu.system + cpu.children_user + cpu.children_system


def _rows_in_duckdb(root: str, table: str = "funding_history") -> int:
    from warehouse import Warehouse, catalog

    # The analyst's connection: it reaches a store's files (an s3:// root) as well as a disk's.
    with catalog.connect(Warehouse.open(root)) as con:
        found = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()  # noqa: S608
    return int(found[0]) if found else 0


def _investments_child(args: argparse.Namespace) -> dict[str, Any]:
    import dagster as dg
    import duckdb

    from assets.resources import WarehouseResource, WhiteBITResource
    from assets.runs import QUIET
    from warehouse import Warehouse, WarehouseConfig

    resources = {
        f"whitebit_{ACCOUNT}": WhiteBITResource(
            api_key=args.api_key, api_secret=args.api_secret, base_url=args.url
        ),
        "warehouse": WarehouseResource.of(WarehouseConfig(args.root)),
    }
    investments = _account_assets().tables["investments"]
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [investments], resources=resources, instance=instance, run_config=QUIET
        )  # fmt: skip
    materialized = result.get_asset_materialization_events()
    meta = next(
        e.materialization.metadata
        for e in materialized
        if e.materialization.asset_key.path[-1] == "investments"
    )
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    with duckdb.connect(str(Warehouse.open(args.root).catalog_path), read_only=True) as con:
        found = con.execute("SELECT count(*) FROM investments WHERE status = 1").fetchone()
    return {
        "active": int(found[0]) if found else 0,
        "complete": bool(checks.get("complete")),
        "slices": len(meta["slices"].value),  # type: ignore[arg-type]
    }


def _plain_child(args: argparse.Namespace) -> dict[str, Any]:
    """Every funding page, one after another, until a short page: fetch only."""
    import httpx

    from bench.client import PlainNonce, plain_request
    from pipeline.whitebit import Credentials

    creds, nonce, rows, offset = Credentials(args.api_key, args.api_secret), PlainNonce(), 0, 0
    with httpx.Client(base_url=args.url) as http:
        while True:
            body = plain_request(http, creds, {"limit": 100, "offset": offset}, nonce)
            rows += len(body["records"])
            if len(body["records"]) < 100:
                return {"rows": rows}
            offset += 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backfill")
    parser.add_argument("who", choices=["ours", "plain", "investments"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--api-secret", required=True)
    parser.add_argument("--first")
    parser.add_argument("--last")
    parser.add_argument("--root")
    parser.add_argument("--paced", action="store_true", help="pace to the spec's budgets")
    parser.add_argument("--history", default="funding_history", help="the history to backfill")
    parser.add_argument("--dagster", action="store_true", help="through Dagster, one run")
    parser.add_argument("--home", help="with --dagster: the instance's home, kept between runs")
    parser.add_argument(
        "--noop", action="store_true", help="with --dagster: the history's twin that does nothing"
    )
    parser.add_argument(
        "--postgres", action="store_true", help=f"with --dagster: instance in ${POSTGRES_URL_ENV}"
    )
    args = parser.parse_args(argv)
    work = {"ours": _ours_child, "plain": _plain_child, "investments": _investments_child}
    result = work[args.who](args)
    result["peak_mb"] = _high_water_mb(os.getpid())
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
