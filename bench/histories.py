"""`make bench`, the histories section: the account's other histories at the scale of a busy
account (the simulator's large scale), side by side in one run.

- Fills: six months of executed trades (over 500,000 fills over some 260 markets), the
  pipeline alone (the walk in time windows streamed month by month into Parquet, the catalog,
  the checks) against the same through Dagster (one run, an on-disk instance made before, as
  the CLI runs it on a warehouse's second night), the median of three pairs, and what Dagster
  alone adds to a run (a twin of the asset that does nothing, run the same way).
- A busy account's six months (`BUSY`: over 2,000,000 fills, some 550,000 orders, 10,000
  conversions): each backfill (the pipeline alone, paced to the spec's budgets) on loopback and
  with every answer a round trip of 100 ms away (give or take 10 ms, the simulator's latency
  switch: the real exchange's distance), against the floor no reading can beat, the larger of
  two measured in the same run (`Floors`): the budget's (its requests at the budget's rate) and
  the CPU's (what our own processes spent, on this machine's cores). The peak memory of the fills
  backfill against the same over a tenth of the fills (`BUSY_TENTH`).
- Deposits and withdrawals of an account with more than 10,000 of them (no date filter, split by
  method and ticker where a slice fills the 10,000 reach) under their endpoint's own budget of
  200 requests per 10 s, the same way.

Each contender runs in a process of its own (`bench.backfill`'s child), one after another. The
simulator writes its fills the first time a page reads them: a first walk, not measured, warms it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
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
#: A busy account: over 2,000,000 fills in six months (11,600 a day; orders and conversions
#: follow them), over 190 days only, so that the simulator builds and holds no more than that.
BUSY: Final = "markets=250,days=190,investments=300,tickers=8,fills=11600"
#: The same account with a tenth of its fills.
BUSY_TENTH: Final = "markets=250,days=190,investments=300,tickers=8,fills=1160"
#: Deposits and withdrawals: no date filter, every day of the account.
FLOWS: Final = "deposits_withdrawals"
_LARGE = Scale.large()


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
    """``history``'s walk paced to the spec's budgets: what ours measured (with ``tree_peak_mb``,
    the peak memory of the walk's process and its writer's, summed), its seconds end to end and
    the simulator's CPU seconds meanwhile (what serving the walk cost the other side)."""
    cpu_before = _cpu_seconds(sim)
    walked, walked_s, peak_mb = _ours(
        sim, first, last, root, dagster=False, paced=True, history=history
    )
    walked["tree_peak_mb"] = peak_mb
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


@dataclass(frozen=True, slots=True)
class Floors:
    """The least time a backfill can take, from what its run measured: the budget's floor is its
    requests (the pages it read) at the rate of the budget that bounds them; the CPU's, the time
    our own processes' CPU seconds (the walk's process and the writer's, from the walk's start
    to the checks' end; the simulator's not counted) need on this machine's cores: the larger of
    each process's seconds (a process's Python runs on one core at a time) and their sum over
    the cores."""

    requests: int
    rate: float
    walk_cpu_s: float
    writer_cpu_s: float
    cores: int

    @property
    def budget_s(self) -> float:
        return self.requests / self.rate

    @property
    def cpu_s(self) -> float:
        both = self.walk_cpu_s + self.writer_cpu_s
        return max(self.walk_cpu_s, self.writer_cpu_s, both / self.cores)

    @property
    def floor_s(self) -> float:
        return max(self.budget_s, self.cpu_s)

    @classmethod
    def of(cls, history: str, walked: dict[str, Any]) -> Floors:
        return cls(
            requests=int(walked["pages"]),
            rate=_budget(spec.HISTORIES[history].operation).per_second,
            walk_cpu_s=float(walked["backfill_cpu_s"]),
            writer_cpu_s=float(walked["writer_cpu_s"]),
            cores=os.cpu_count() or 1,
        )


def _floors_figure(
    history: str, latency: Latency, run: tuple[dict[str, Any], float, float]
) -> Figure:
    """A busy account's backfill against its floor (`Floors`): its seconds from the walk's start
    to the checks' end, at ``latency``."""
    walked, _, served_s = run
    floors, seconds = Floors.of(history, walked), float(walked["backfill_s"])
    rate = floors.rate
    distance = (
        f"{latency.round_trip_s * 1000:g} ms a round trip (give or take "
        f"{latency.jitter_s * 1000:g} ms)"
        if latency.round_trip_s
        else "loopback"
    )
    bound = "the budget's" if floors.budget_s >= floors.cpu_s else "the CPU's"
    return Figure(
        SECTION, f"  {history}, a busy account's six months, {distance}: backfill s",
        seconds, "s", floors.floor_s, "max(budget floor, CPU floor)",
        f"lower is better; goal at most 1.5x; {walked['rows']:,} rows, {floors.requests:,} "
        f"pages; budget floor {floors.requests:,} requests / {rate:g} a second = "
        f"{floors.budget_s:.1f} s; CPU floor max(walk's process {floors.walk_cpu_s:.1f} s, "
        f"writer's {floors.writer_cpu_s:.1f} s, both / {floors.cores} cores) = "
        f"{floors.cpu_s:.1f} s; {bound} binds; walk {walked['walk_s']:.1f} s at "
        f"{walked['pages_per_s']:.0f} pages/s ({walked['pages_per_s'] / rate:.1%} of the budget, "
        f"{walked['pages_per_s'] * latency.round_trip_s:.0f} requests in flight on average); "
        f"{walked['rate_limited']} answers 429; the simulator's CPU {served_s:.1f} s; peak "
        f"{walked['tree_peak_mb']:.0f} MB",
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


Run = tuple[dict[str, Any], float, float]


def _busy(
    sim: SpawnedSimulator,
    days: tuple[date, date],
    base: Path,
    histories: tuple[str, ...] = PACED,
    *,
    distant: bool = True,
) -> tuple[dict[str, Run], dict[str, Run]]:
    """Each history's backfill, paced, on loopback and (``distant``) at `DISTANCE`, after a walk
    each that warms the simulator (it writes its records the first time a page reads them):
    (loopback's, the distant's) by history, each `_paced`'s."""
    sim.control("limits", enabled=False)
    for name in histories:
        _ours(sim, *days, base / f"warm-{name}", dagster=False, history=name)
    sim.control("limits", enabled=True)
    near = {name: _paced(sim, *days, base / f"near-{name}", name) for name in histories}
    far = {name: _distant(sim, *days, base / f"far-{name}", name)
           for name in histories if distant}  # fmt: skip
    return near, far


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
            deposits = _paced(sim, history_start, last, base / "deposits", FLOWS)
        with spawn(scale=BUSY, frozen_at=EPOCH, timeout_s=600) as busy:
            near, far = _busy(busy, six_months, base)
        with spawn(scale=BUSY_TENTH, frozen_at=EPOCH) as small_sim:
            tenth, _ = _busy(small_sim, six_months, base / "tenth", ("trades",), distant=False)

    busy_fills, tenth_fills = near["trades"][0]["rows"], tenth["trades"][0]["rows"]
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
        _paced_figure(FLOWS, f"{_LARGE.days} days", *deposits),
        *(_floors_figure(name, latency, runs[name])
          for latency, runs in ((Latency(), near), (DISTANCE, far)) for name in PACED),
        Figure(SECTION, f"peak memory, a busy account's fills backfill: {busy_fills:,} fills"
               f" against a tenth ({tenth_fills:,})", near["trades"][0]["tree_peak_mb"], "MB",
               tenth["trades"][0]["tree_peak_mb"],
               f"ours alone, {tenth_fills:,} fills",
               "lower is better; goal at most 1.3x: the walk streams its windows (those read "
               "ahead hold at most 16 pages each, the one yielded what a round trip needs), the "
               "writer a month; both processes, summed; on loopback, paced; at "
               f"{DISTANCE.round_trip_s * 1000:g} ms {far['trades'][0]['tree_peak_mb']:.0f} MB"),
    ]  # fmt: skip
