"""`make bench`, the histories section: the account's other histories at the scale of a busy
account (the simulator's large scale), side by side in one run.

- Fills: six months of executed trades (over 500,000 fills over some 260 markets), the
  pipeline alone (the walk in time windows streamed month by month into Parquet, the catalog,
  the checks) against the same through Dagster (one run, an on-disk instance, as the CLI runs
  it); then paced to the spec's budgets: the walk's pages per second against its budget group's
  rate, and what bounds it where the budget does not (the simulator's own time, measured); and
  the peak memory against the same walk over a tenth of the fills (a simulator at a tenth of
  the large scale's fills a day).
- Deposits and withdrawals of an account with more than 10,000 of them (no date filter, split by
  method and ticker where a slice fills the 10,000 reach) under their endpoint's own budget of
  200 requests per 10 s, against the floor that budget sets.

Each contender runs in a process of its own (`bench.backfill`'s child), one after another. The
simulator writes its fills the first time a page reads them: a first walk, not measured, warms it.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from bench import Figure
from bench.backfill import _ours
from bench.client import _cpu_seconds
from pipeline import spec
from pipeline.simulator import EPOCH, Scale, spawn

SECTION: Final = "histories"
#: A tenth of the large scale's fills a day, everything else alike.
_LARGE = Scale.large()
TENTH: Final = (
    f"markets={_LARGE.markets},days={_LARGE.days},investments={_LARGE.investments},"
    f"tickers={_LARGE.tickers},fills={_LARGE.fills // 10}"
)


def _rate(op: spec.Operation) -> float:
    """Requests a second the operation's budgets allow (the stricter of group and own)."""
    budgets = [b for b in (op.budget, op.endpoint_budget) if b is not None]
    return min(b.requests / b.period_s for b in budgets)


def run() -> list[Figure]:
    last = datetime.fromtimestamp(EPOCH, UTC).date() - timedelta(days=1)
    six_months = (spec.floor_day(last + timedelta(days=1)), last)
    history_start = last - timedelta(days=_LARGE.days)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        with spawn(scale="large", frozen_at=EPOCH) as sim:
            sim.control("limits", enabled=False)

            def fills(name: str, **options: Any) -> tuple[dict[str, Any], float, float]:
                return _ours(sim, *six_months, base / name, history="trades", **options)

            fills("warm", dagster=False)
            alone, alone_s, alone_mb = fills("alone", dagster=False)
            dag, dag_s, dag_mb = fills("dagster", dagster=True)
            cpu_before = _cpu_seconds(sim)
            sim.control("limits", enabled=True)
            paced, paced_s, _ = fills("paced", dagster=False, paced=True)
            served_s = _cpu_seconds(sim) - cpu_before
            deposits, deposits_s, _ = _ours(
                sim, history_start, last, base / "deposits", dagster=False, paced=True,
                history="deposits_withdrawals",
            )  # fmt: skip
        with spawn(scale=TENTH, frozen_at=EPOCH) as small_sim:
            small_sim.control("limits", enabled=False)
            _ours(small_sim, *six_months, base / "tenth-warm", dagster=False, history="trades")
            tenth, _, tenth_mb = _ours(
                small_sim, *six_months, base / "tenth", dagster=False, history="trades"
            )

    trade_rate = _rate(spec.EXECUTED_HISTORY)
    deposit_rate = _rate(spec.MAIN_ACCOUNT_HISTORY)
    same = "the same rows" if dag["rows"] == alone["rows"] else "ROWS DIFFER"
    walk_share = served_s / float(paced["walk_s"]) if paced["walk_s"] else 0.0
    floor_s = deposits["pages"] / deposit_rate
    return [
        Figure(SECTION, f"six-month fills backfill, {alone['rows']:,} fills over "
               f"{_LARGE.markets}+ markets: ours through Dagster against the pipeline alone",
               dag_s, "s", alone_s, "ours, the pipeline alone",
               f"lower is better; goal at most 1.1x; {same}; {alone['partitions']} partitions; "
               f"peak {dag_mb:.0f} MB against {alone_mb:.0f} MB"),
        Figure(SECTION, "  the pipeline alone: fills per second", alone["rows"] / alone_s,
               "rows/s", None, "", f"{alone['pages']:,} pages in {alone['walk_s']:.1f} s of walk"),
        Figure(SECTION, "  paced to the trade-account budget: walk pages/s",
               paced["pages_per_s"], "pages/s", trade_rate,
               "budget 12,000 requests / 10 s",
               f"{paced['pages_per_s'] / trade_rate:.1%} of the budget while walking; "
               f"{paced['rate_limited']} answers 429; the bound is our walk's own CPU, busy "
               f"{paced['walk_cpu_s'] / paced['walk_s']:.0%} of the walk (reading 500 fills "
               f"a page, each fractional time exact), the simulator's {walk_share:.0%} "
               f"({served_s:.1f} s of {paced['walk_s']:.1f} s); end to end "
               f"{paced['rows'] / paced_s:,.0f} rows/s"),
        Figure(SECTION, f"peak memory, fills backfill: {alone['rows']:,} fills against a "
               f"tenth ({tenth['rows']:,})", alone_mb, "MB", tenth_mb,
               f"ours alone, {tenth['rows']:,} fills",
               "lower is better; goal at most 1.3x: the walk streams a window at a time, the "
               "writer a month; both processes, summed"),
        Figure(SECTION, f"deposits and withdrawals, {deposits['rows']:,} over "
               f"{_LARGE.days} days, paced: walk pages/s", deposits["pages_per_s"], "pages/s",
               deposit_rate, "its own budget, 200 requests / 10 s",
               f"{deposits['pages_per_s'] / deposit_rate:.1%} of the budget while walking; "
               f"{deposits['rate_limited']} answers 429; {deposits['pages']} pages, "
               f"{deposits_s:.1f} s end to end against a floor of {floor_s:.1f} s"),
    ]  # fmt: skip
