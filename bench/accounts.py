"""`make bench`, the accounts section: five accounts of one exchange address (a main account and
four sub-accounts of the large scale) under the spec's budgets, through Dagster, as the nightly
service runs them: each account a run in a process of its own, on one Dagster instance (its
storage made once), all at once, against the same five one after another, and against the floor
the address's budgets set.

- a backfill: every account's whole funding history (over a million rows each);
- a nightly-sized run: each account's funding of one day, then its snapshots (the investments
  history only for the main account: only a B2B partner's key may read it).

The floor is the longest of the budget groups' times: each group's requests (as the simulator
counted them) divided by its budget's rate, since groups with separate budgets can be walked at
once. "Budget used while walking" is the funding pages the simulator answered over the span from
its first to its last funding answer, against the budget's rate. The wall time runs to the last
process's exit; the note also gives the last run's end as the instance records it (what the UI
and the alerts see), since a run's process still tears its interpreter down after that.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from bench import Figure
from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SpawnedSimulator, spawn

SECTION: Final = "accounts"
SUBACCOUNTS: Final = 4
#: The simulator's data clock: its history ends the day before.
LAST_DAY: Final = datetime.fromtimestamp(EPOCH, UTC).date() - timedelta(days=1)
FIRST_DAY: Final = LAST_DAY - timedelta(days=Scale.large().days)


def accounts_file(
    sim: SpawnedSimulator, path: Path, subaccounts: int = SUBACCOUNTS
) -> tuple[Path, dict[str, str]]:
    """The main account and ``subaccounts`` sub-accounts, their secrets in variables (the
    environment of the runs)."""
    lines, env = ["accounts:"], {}
    for role in ("partner", *(f"sub_{n}" for n in range(1, subaccounts + 1))):
        name = "main" if role == "partner" else role
        creds = sim.credentials_for(role)
        env[f"BENCH_{name.upper()}_KEY"] = creds.api_key
        env[f"BENCH_{name.upper()}_SECRET"] = creds.api_secret
        lines += [
            f"  - name: {name}",
            f"    base_url: {sim.url}",
            f"    api_key_env: BENCH_{name.upper()}_KEY",
            f"    api_secret_env: BENCH_{name.upper()}_SECRET",
            f"    investments: {str(role == 'partner').lower()}",
            f"    subaccounts: {str(role == 'partner').lower()}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path, env


def _start(account: str, what: str, root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our interpreter, our module, no shell
        [sys.executable, "-m", "bench.accounts", what, "--account", account, "--root", str(root)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{process.args!r} failed ({process.returncode}):\n{err[-3000:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _scenario(
    sim: SpawnedSimulator,
    accounts: Sequence[str],
    what: str,
    base: Path,
    env: dict[str, str],
    *,
    together: bool,
) -> tuple[float, list[dict[str, Any]], dict[str, Any]]:
    """Every account's runs, at once or one after another: (wall seconds, each account's
    result, the simulator's counts)."""
    sim.stats(reset=True)
    root = base / f"{what}-{'together' if together else 'in-turn'}"
    wall = time.time() - time.monotonic()  # the instance records runs' ends in wall-clock time
    started = time.monotonic()
    if together:
        processes = [_start(account, what, root, env) for account in accounts]
        results = [_finish(process) for process in processes]
    else:
        results = [_finish(_start(account, what, root, env)) for account in accounts]
    ended = time.monotonic()
    stats = sim.stats()
    first, last = stats["first_last"].get(spec.FUNDING_HISTORY.path, (started, started))
    stats["head_s"], stats["tail_s"] = first - started, ended - last
    stats["runs_tail_s"] = max(r["ended_at"] for r in results) - wall - last
    return ended - started, results, stats


def _floor(stats: dict[str, Any]) -> float:
    """The longest group's requests over its budget's rate: the least time they could take."""
    by_group: dict[str, int] = {}
    for path_status, count in stats["answered"].items():
        path = path_status.rsplit(" ", 1)[0]
        operation = next((op for op in spec.OPERATIONS if op.path == path), None)
        if operation is not None:
            group = operation.budget
            by_group[group.group] = by_group.get(group.group, 0) + count
    budgets = {op.budget.group: op.budget for op in spec.OPERATIONS}
    return max(n * budgets[g].period_s / budgets[g].requests for g, n in by_group.items())


def _walked(stats: dict[str, Any]) -> float:
    """Funding pages per second over the span the simulator answered them, against the budget's
    rate."""
    path = spec.FUNDING_HISTORY.path
    pages = stats["answered"].get(f"{path} 200", 0)
    span = stats["spans"].get(path, 0.0)
    budget = spec.FUNDING_HISTORY.budget
    return pages / span / (budget.requests / budget.period_s) if span else 0.0


def _instance(home: Path) -> Path:
    """A Dagster instance on SQLite, its storage made before any clock runs: the instance every
    run of the service opens, rather than one made anew for each run."""
    import dagster as dg

    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)):
        pass
    return home


def run() -> list[Figure]:
    sim = spawn(scale="large", frozen_at=EPOCH, subaccounts=SUBACCOUNTS)
    with sim, tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        path, secrets = accounts_file(sim, base / "accounts.yaml")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WHITEBIT_", "DAGSTER_"))}
        env |= secrets | {
            "WHITEBIT_ACCOUNTS_FILE": str(path),
            "WHITEBIT_START_DATE": FIRST_DAY.isoformat(),
            "WHITEBIT_PACING_DIR": str(base / "pacing"),
            "PYTHONUNBUFFERED": "1",
            "DAGSTER_HOME": str(_instance(base / "dagster")),
        }
        accounts = ["main", *(f"sub_{n}" for n in range(1, SUBACCOUNTS + 1))]
        # Each sub-account's data is built on its first request: before any clock runs.
        _scenario(sim, accounts, "warm", base, env, together=False)
        figures: list[Figure] = []
        for what, title in (("backfill", "whole funding history"), ("nightly", "nightly, all")):
            together_s, runs, together = _scenario(sim, accounts, what, base, env, together=True)
            in_turn_s, in_turn_runs, in_turn = _scenario(
                sim, accounts, what, base, env, together=False
            )
            floor = _floor(together)
            rows = sum(r["rows"] for r in runs)
            limited = together["rate_limited"] + in_turn["rate_limited"]
            rate = spec.FUNDING_HISTORY.budget.requests / spec.FUNDING_HISTORY.budget.period_s
            alone = [r["pages"] / r["walk_s"] / rate for r in in_turn_runs if r["walk_s"]]
            figures += [
                Figure(SECTION, f"5 accounts, {title}, runs at once against one after another",
                       together_s, "s", in_turn_s, "the same runs one after another",
                       f"{rows:,} rows; {limited} answers 429 (both); lower is better"),
                Figure(SECTION, f"  5 accounts at once, {title}, against the budgets' floor",
                       together_s, "s", floor, "longest budget group's requests / its rate",
                       f"funding budget used while walking: {_walked(together):.1%} (each "
                       f"account alone: {min(alone):.1%} .. {max(alone):.1%}); before the first "
                       f"request {together['head_s']:.1f} s; after the last answer, the last "
                       f"run's end (as the instance records it) {together['runs_tail_s']:.1f} s, "
                       f"the last process's exit {together['tail_s']:.1f} s"),
            ]  # fmt: skip
            if what == "nightly":
                figures += _by_group(together)
    return figures


def _by_group(stats: dict[str, Any]) -> list[Figure]:
    """Of a night of every history: each budget group's pages per second over the span from its
    first to its last answer, against the group's rate, with its 429 answers."""
    groups: dict[str, list[spec.Operation]] = {}
    for op in spec.OPERATIONS:
        if f"{op.path} 200" in stats["answered"]:
            groups.setdefault(op.budget.group, []).append(op)
    figures = []
    for group, ops in sorted(groups.items()):
        pages = sum(stats["answered"].get(f"{op.path} 200", 0) for op in ops)
        limited = sum(stats["answered"].get(f"{op.path} 429", 0) for op in ops)
        spans = [stats["first_last"][op.path] for op in ops if op.path in stats["first_last"]]
        span = max(last for _, last in spans) - min(first for first, _ in spans)
        budget = ops[0].budget
        rate = budget.requests / budget.period_s
        figures.append(
            Figure(SECTION, f"  5 accounts' night, {group} group: pages/s while walking",
                   pages / span if span else 0.0, "pages/s", rate,
                   f"budget {budget.requests:,} / {budget.period_s:g} s",
                   f"{pages:,} pages of {len(ops)} endpoint(s) in {span:.1f} s; {limited} answers "
                   "429; a night's walks are a few pages each: the round trips and the runs' "
                   "steps bound them, not the budget")
        )  # fmt: skip
    return figures


# --- The child: one account's runs, through Dagster ----------------------------------------


def _child(args: argparse.Namespace) -> dict[str, Any]:
    import dagster as dg

    from assets.definitions import location, whitebit_resource
    from assets.instance import instance as opened
    from assets.resources import WarehouseResource
    from assets.runs import QUIET
    from assets.settings import Settings
    from warehouse.schemas import month_of

    settings = Settings.from_env()
    built = location(settings)
    assets = built.assets_of(args.account)
    configured = {
        assets.account.resource_key: whitebit_resource(assets.account, settings),
        "warehouse": WarehouseResource.of(settings.warehouse_config(args.root)),
    }
    if args.what == "warm":
        first = last = LAST_DAY
    elif args.what == "backfill":
        first, last = FIRST_DAY, LAST_DAY
    else:
        first = last = LAST_DAY
    days = {"first_day": first.isoformat(), "last_day": last.isoformat()}
    funding = assets.tables["funding_history"]
    # The nightly walks every history of the account for the day; the others, funding only.
    walked = list(assets.monthly) if args.what == "nightly" else [funding]
    config = {**QUIET, "ops": {a.node_def.name: {"config": days} for a in walked}}
    months = {
        "dagster/asset_partition_range_start": month_of(first),
        "dagster/asset_partition_range_end": month_of(last),
    }
    with opened(settings) as instance:
        results = [
            dg.materialize(
                walked, resources=configured, instance=instance, tags=months, run_config=config,
            )
        ]  # fmt: skip
        if args.what == "nightly":
            results.append(
                dg.materialize(
                    list(assets.snapshots),
                    resources=configured,
                    instance=instance,
                    run_config=QUIET,
                )
            )
        record = instance.get_run_record_by_id(results[-1].run_id)
    if record is None or record.end_time is None:
        raise RuntimeError(f"run {results[-1].run_id} is not recorded as ended")
    pages, walk_s = _walk(results[0], funding.key)
    return {
        "rows": sum(_row_count(result) for result in results),
        "pages": pages,
        "walk_s": walk_s,
        "ended_at": record.end_time,
    }


def _row_count(result: Any) -> int:
    """Rows a run wrote: each asset's ``dagster/row_count`` (a backfill's partitions each repeat
    the run's), summed over its assets."""
    counts = {
        e.asset_key: int(e.materialization.metadata["dagster/row_count"].value)
        for e in result.get_asset_materialization_events()
    }
    return sum(counts.values())


def _walk(result: Any, key: Any) -> tuple[int, float]:
    """The funding walk's pages and seconds, from the run's metadata."""
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key == key)
    meta = event.materialization.metadata
    return int(meta["pages_fetched"].value), float(meta["walk_seconds"].value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.accounts")
    parser.add_argument("what", choices=["warm", "backfill", "nightly"])
    parser.add_argument("--account", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(_child(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
