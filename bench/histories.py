"""`make bench`, the histories section: the account's other histories at the scale of a busy
account (the simulator's large scale), side by side in one run.

- Fills: six months of executed trades (over 500,000 fills over some 260 markets), the
  pipeline alone (the walk in time windows streamed month by month into Parquet, the catalog,
  the checks) against the same through Dagster (one run, an on-disk instance made before, as
  the CLI runs it on a warehouse's second night), the median of three pairs, and what Dagster
  alone adds to a run (a twin of the asset that does nothing, run the same way); the peak memory
  against the same walk over a tenth of the fills (a simulator at a tenth of the large scale's
  fills a day).
- Six months of fills, orders and conversions, each walk paced to the spec's budgets: its pages
  per second against the budget that bounds it, and what bounds it where the budget does not
  (each side's CPU while it walked, measured).
- The same three walks with every answer a round trip of 100 ms away (give or take 10 ms, the
  simulator's latency switch), against themselves on loopback: the real exchange's distance, where
  a walk waits a round trip for every page it has not asked ahead.
- Deposits and withdrawals of an account with more than 10,000 of them (no date filter, split by
  method and ticker where a slice fills the 10,000 reach) under their endpoint's own budget of
  200 requests per 10 s, the same way.

Each contender runs in a process of its own (`bench.backfill`'s child), one after another. The
simulator writes its fills the first time a page reads them: a first walk, not measured, warms it.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from bench import Figure
from bench.backfill import _ours
from bench.client import _cpu_seconds
from pipeline import spec
from pipeline.simulator import EPOCH, Latency, Scale, SpawnedSimulator, spawn

SECTION: Final = "histories"
#: The six-month histories whose walks are paced and compared with their budgets.
PACED: Final = ("trades", "orders", "conversions")
#: Fills backfills, the pipeline alone and through Dagster, one after the other: the figure is
#: each side's median (the machine's noise is about the gap the goal allows).
PAIRS: Final = 3
#: The exchange's distance the paced walks are measured at besides loopback's.
DISTANCE: Final = Latency(0.1, 0.01)
#: Deposits and withdrawals: no date filter, every day of the account.
FLOWS: Final = "deposits_withdrawals"
#: A tenth of the large scale's fills a day, everything else alike.
_LARGE = Scale.large()
TENTH: Final = (
    f"markets={_LARGE.markets},days={_LARGE.days},investments={_LARGE.investments},"
    f"tickers={_LARGE.tickers},fills={_LARGE.fills // 10}"
)


def _median(
    runs: list[tuple[dict[str, Any], float, float]],
) -> tuple[dict[str, Any], float, float]:
    """The run of the median seconds, with the highest peak memory of them all."""
    result, seconds, _ = sorted(runs, key=lambda run: run[1])[len(runs) // 2]
    return result, seconds, max(mb for _, _, mb in runs)


def _budget(op: spec.Operation) -> spec.RateBudget:
    """The budget that bounds the operation: the stricter of its group's and its own."""
    budgets = [b for b in (op.budget, op.endpoint_budget) if b is not None]
    return min(budgets, key=lambda b: b.per_second)


def _paced(
    sim: SpawnedSimulator, first: date, last: date, root: Path, history: str
) -> tuple[dict[str, Any], float, float]:
    """``history``'s walk paced to the spec's budgets: what ours measured, its seconds end to end
    and the simulator's CPU seconds meanwhile (what serving the walk cost the other side)."""
    cpu_before = _cpu_seconds(sim)
    walked, walked_s, _ = _ours(sim, first, last, root, dagster=False, paced=True, history=history)
    return walked, walked_s, _cpu_seconds(sim) - cpu_before


def _distant(
    sim: SpawnedSimulator, first: date, last: date, root: Path, history: str
) -> tuple[dict[str, Any], float, float]:
    """`_paced`, every answer a round trip away (`DISTANCE`); loopback's again after."""
    sim.control("latency", round_trip_s=DISTANCE.round_trip_s, jitter_s=DISTANCE.jitter_s)
    try:
        return _paced(sim, first, last, root, history)
    finally:
        sim.control("latency")


def _distant_figure(
    history: str,
    span: str,
    near: tuple[dict[str, Any], float, float],
    far: tuple[dict[str, Any], float, float],
) -> Figure:
    """The paced walk at `DISTANCE` against itself on loopback, in one run: pages a second, each
    one's share of the budget, wall time, and how many requests were in flight on average."""
    (walked, walked_s, _), (distant, distant_s, _) = near, far
    rate = _budget(spec.HISTORIES[history].operation).per_second
    trip, jitter = DISTANCE.round_trip_s, DISTANCE.jitter_s
    return Figure(
        SECTION, f"  {history}, {span} paced, {trip * 1000:g} ms a round trip: walk pages/s",
        distant["pages_per_s"], "pages/s", walked["pages_per_s"], "the same walk on loopback",
        f"{distant['pages_per_s'] / rate:.1%} of the budget while walking against "
        f"{walked['pages_per_s'] / rate:.1%} on loopback; {distant_s:.1f} s end to end against "
        f"{walked_s:.1f} s (walk {distant['walk_s']:.1f} s against {walked['walk_s']:.1f} s); "
        f"{distant['pages']:,} pages, {distant['rows']:,} rows; {distant['rate_limited']} answers "
        f"429; a round trip {trip * 1000:g} ms, give or take {jitter * 1000:g} ms: "
        f"{distant['pages_per_s'] * trip:.1f} requests in flight on average (pages/s x round "
        f"trip), where one at a time would read {1 / trip:.0f} pages/s",
    )  # fmt: skip


def _paced_figure(
    history: str, span: str, walked: dict[str, Any], walked_s: float, served_s: float
) -> Figure:
    """The walk's pages a second against its budget; below 95% of it, what bounds it instead:
    the CPU each side spent while it walked (ours: reading and writing the pages)."""
    budget = _budget(spec.HISTORIES[history].operation)
    rate = budget.per_second
    walk_s = float(walked["walk_s"])
    share = walked["pages_per_s"] / rate
    ours_busy, theirs_busy = walked["walk_cpu_s"] / walk_s, served_s / walk_s
    bound = (
        "the budget bounds it"
        if share >= 0.95
        else f"the bound is {'ours' if ours_busy >= theirs_busy else 'the simulator'}: CPU busy"
        f" {ours_busy:.0%} of the walk in ours, {theirs_busy:.0%} in the simulator"
    )
    return Figure(
        SECTION, f"  {history}, {span} paced: walk pages/s", walked["pages_per_s"],
        "pages/s", rate, f"budget {budget.requests:,} requests / {budget.period_s:g} s",
        f"{share:.1%} of the budget while walking; {walked['rate_limited']} answers 429; "
        f"{walked['pages']:,} pages, {walked['rows']:,} rows; {bound}; {walked_s:.1f} s end "
        f"to end against the budget's floor of {walked['pages'] / rate:.1f} s",
    )  # fmt: skip


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

            # The warm-up makes the instance the Dagster runs then open, as a warehouse's
            # runs after its first do.
            home = base / "dagster-home"
            fills("warm", dagster=True, home=home)
            pairs = [
                (fills(f"alone-{n}", dagster=False), fills(f"dagster-{n}", dagster=True, home=home))
                for n in range(PAIRS)
            ]
            alone, alone_s, alone_mb = _median([a for a, _ in pairs])
            dag, dag_s, dag_mb = _median([d for _, d in pairs])
            noops = [fills(f"noop-{n}", dagster=True, home=home, noop=True) for n in range(PAIRS)]
            noop_s = sorted(float(result["run_s"]) for result, _, _ in noops)[PAIRS // 2]
            sim.control("limits", enabled=True)
            paced = {name: _paced(sim, *six_months, base / f"paced-{name}", name)
                     for name in PACED}  # fmt: skip
            distant = {name: _distant(sim, *six_months, base / f"distant-{name}", name)
                       for name in PACED}  # fmt: skip
            deposits = _paced(sim, history_start, last, base / "deposits", FLOWS)
        with spawn(scale=TENTH, frozen_at=EPOCH) as small_sim:
            small_sim.control("limits", enabled=False)
            _ours(small_sim, *six_months, base / "tenth-warm", dagster=False, history="trades")
            tenth, _, tenth_mb = _ours(
                small_sim, *six_months, base / "tenth", dagster=False, history="trades"
            )

    same = "the same rows" if dag["rows"] == alone["rows"] else "ROWS DIFFER"
    return [
        Figure(SECTION, f"six-month fills backfill, {alone['rows']:,} fills over "
               f"{_LARGE.markets}+ markets: ours through Dagster against the pipeline alone",
               dag_s, "s", alone_s, "ours, the pipeline alone",
               f"lower is better; goal at most 1.1x; median of {PAIRS} pairs, one after the "
               f"other, the instance made before (as a warehouse's after its first run); {same}; "
               f"{alone['partitions']} partitions; peak {dag_mb:.0f} MB against "
               f"{alone_mb:.0f} MB"),
        Figure(SECTION, "  Dagster's own cost of a run: the fills asset's twin that does "
               "nothing, the same partitions and checks", noop_s, "s", None, "",
               f"the instance opened (mostly importing its storage libraries), the run recorded, "
               f"its events written: from opening the instance to the run's end; median of "
               f"{PAIRS}; a cost per run, whatever the backfill's size"),
        Figure(SECTION, "  the pipeline alone: fills per second", alone["rows"] / alone_s,
               "rows/s", None, "", f"{alone['pages']:,} pages in {alone['walk_s']:.1f} s of walk"),
        *(_paced_figure(name, "six months", *walked) for name, walked in paced.items()),
        *(_distant_figure(name, "six months", paced[name], distant[name]) for name in PACED),
        Figure(SECTION, f"peak memory, fills backfill: {alone['rows']:,} fills against a "
               f"tenth ({tenth['rows']:,})", alone_mb, "MB", tenth_mb,
               f"ours alone, {tenth['rows']:,} fills",
               "lower is better; goal at most 1.3x: the walk streams its windows (those read "
               "ahead hold at most 16 pages each), the writer a month; both processes, summed"),
        _paced_figure(FLOWS, f"{_LARGE.days} days", *deposits),
    ]  # fmt: skip
