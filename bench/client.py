"""`make bench`, the client's section: walks against the simulator, budgets on and off.

The simulator runs in its own process pinned to CPU 0, this process on CPU 1 (the machine has
two). With the spec's budgets on, a walk's rate is shown against its budget, with the 429s the
simulator answered. With budgets off, the funding walk is set against a plain sequential
`httpx.Client` loop that signs its own requests and fetches the same pages, and the simulator's
own CPU time during those walks tells how many pages one core of it serves a second.

The paced funding and investments walks again at 100 ms a round trip (the simulator's latency
switch), against themselves on loopback, with the requests they kept in flight.

The prices walk (`spec.DAILY_CANDLES`, as the prices asset walks it): the daily candles of every
spot market the simulator lists, a year of them and seven years, under the spec's budgets; its
requests a second against the public v1 budget, and what bounds it where the budget does not
(the pacer's opening burst, each side's CPU while it walked).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from assets.prices import PAGING
from bench import Figure
from pipeline import spec
from pipeline.simulator import EPOCH, Latency, SpawnedSimulator, spawn
from pipeline.whitebit import AsyncWhiteBIT, Credentials, Pacer, WalkStats

SECTION = "client"
#: The simulator's data clock, frozen so every run reads the same pages.
FROZEN_AT = EPOCH
#: Pages of the funding walks.
FUNDING_PAGES = 1_000
#: Unthrottled runs of each side, interleaved; the best of each is shown (this machine is a VM
#: whose speed wanders by tens of percent from one second to the next).
REPEATS = 3
FUNDING = spec.FUNDING_HISTORY
INVESTMENTS = spec.INVESTMENTS_HISTORY
PRICES = spec.DAILY_CANDLES
#: The prices walks' ranges, in years of 365 days ending with the simulator's day.
PRICES_YEARS = (1, 7)
#: The real exchange's distance, for the paced walks' twins.
DISTANCE = Latency(0.1, 0.01)


@contextmanager
def _on_cpu(cpu: int) -> Iterator[None]:
    """Run this process on one CPU for the duration (where the OS lets us pin it)."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _cpu_seconds(sim: SpawnedSimulator) -> float:
    """CPU time (user + system) the simulator's process has used so far (Linux /proc)."""
    stat = Path(f"/proc/{sim.process.pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rate_limited(sim: SpawnedSimulator) -> int:
    """429 answers the simulator has given so far (its gateway's and rejected nonces)."""
    answered: dict[str, int] = sim.stats()["answered"]
    return sum(n for what, n in answered.items() if what.endswith(" 429"))


def _limit() -> int:
    limit = FUNDING.param("limit").maximum
    assert limit is not None
    return limit


def _since_for_pages(sim: SpawnedSimulator, creds: Credentials, pages: int) -> int:
    """A window start that makes the funding walk about ``pages`` pages long."""
    limit = _limit()
    # The walk steps by limit - 1 (one record of overlap): the record it reaches at ``pages``.
    offset = pages * (limit - 1)
    with httpx.Client(base_url=sim.url) as http:
        body = plain_request(http, creds, {"limit": 1, "offset": offset}, PlainNonce())
    return int(body["records"][0]["fundingTime"])


class PlainNonce:
    """The plain loop's own nonces: strictly increasing milliseconds, no window."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self) -> int:
        self.last = max(self.last + 1, time.time_ns() // 1_000_000)
        return self.last


def plain_request(
    http: httpx.Client, creds: Credentials, params: dict[str, Any], nonce: PlainNonce
) -> Any:
    """What a hand-written client does: sign, POST, check the status, parse with orjson."""
    raw = orjson.dumps({"request": FUNDING.path, "nonce": str(nonce()), **params})
    payload = base64.b64encode(raw)
    signature = hmac.new(creds.api_secret.encode(), payload, hashlib.sha512).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-TXC-APIKEY": creds.api_key,
        "X-TXC-PAYLOAD": payload.decode(),
        "X-TXC-SIGNATURE": signature,
    }
    response = http.post(FUNDING.path, content=raw, headers=headers)
    response.raise_for_status()
    return orjson.loads(response.content)


def _plain_loop(sim: SpawnedSimulator, creds: Credentials, pages: int) -> tuple[float, int]:
    """Seconds and rows for ``pages`` funding pages fetched one after another."""
    limit, nonce, rows = _limit(), PlainNonce(), 0
    with httpx.Client(base_url=sim.url) as http:
        started = time.perf_counter()
        for page in range(pages):
            body = plain_request(http, creds, {"limit": limit, "offset": page * limit}, nonce)
            rows += len(body["records"])
        return time.perf_counter() - started, rows


async def _funding_walk(
    sim: SpawnedSimulator, creds: Credentials, since: int, pacing: Pacer | bool
) -> WalkStats:
    async with AsyncWhiteBIT(creds, base_url=sim.url, pacing=pacing) as client:
        walk = client.walk(spec.FUNDING, since=datetime.fromtimestamp(since, UTC))
        async for _ in walk:
            pass
    return walk.stats


async def _investments_walk(
    sim: SpawnedSimulator, creds: Credentials, pacing: Pacer | bool
) -> WalkStats:
    async with AsyncWhiteBIT(creds, base_url=sim.url, pacing=pacing) as client:
        walk = client.walk(spec.INVESTMENTS)
        async for _ in walk:
            pass
    return walk.stats


#: A prices walk: its stats, its markets, the client's requests in flight at once, and the CPU
#: seconds each side spent while it walked (ours, then the simulator's).
PricesWalked = tuple[WalkStats, int, int, float, float]


async def _prices_walk(sim: SpawnedSimulator, years: int) -> PricesWalked:
    """Every spot market's daily candles of ``years`` years to the simulator's day, walked as the
    prices asset walks them (the markets listed first), a fresh pacer with the spec's budgets."""
    async with AsyncWhiteBIT(base_url=sim.url, pacing=Pacer()) as client:
        markets = [m["name"] for m in await client.markets() if m["type"] == "spot"]
        until = datetime.fromtimestamp(FROZEN_AT, UTC).date() + timedelta(days=1)
        since = until - timedelta(days=365 * years)
        walk = client.walk(
            PRICES,
            since=datetime.combine(since, datetime.min.time(), UTC),
            until=datetime.combine(until, datetime.min.time(), UTC),
            values={PAGING.setting: markets},
        )
        ours_before, served_before = time.process_time(), _cpu_seconds(sim)
        async for _ in walk:
            pass
        ours_s, served_s = time.process_time() - ours_before, _cpu_seconds(sim) - served_before
        return walk.stats, len(markets), client.max_concurrency, ours_s, served_s


def _prices_figure(years: int, walked: PricesWalked, limited: int) -> Figure:
    """The walk's requests a second against the public v1 budget. The budget bounds a walk that
    takes no longer than the pacer makes it (its opening burst at once, then its rate); of a
    walk that takes longer, what bounds it is said: its few requests, and each side's CPU."""
    stats, markets, slots, ours_s, served_s = walked
    op, pacer = PRICES.operation, Pacer()
    budget, burst = op.budget, pacer.burst_of(op)
    floor_s = max(stats.pages - burst, 0) / pacer.rate(op)
    share = stats.pages_per_s / budget.per_second
    if floor_s >= 0.95 * stats.elapsed_s:
        bound = "the budget bounds it"
    else:
        ours_busy, theirs_busy = ours_s / stats.elapsed_s, served_s / stats.elapsed_s
        side = "the simulator's CPU, making" if theirs_busy >= ours_busy else "our CPU, reading"
        # Every market and window is asked at once, as many in flight as the client has slots.
        trips = -(-stats.pages // slots)
        bound = (
            f"not the budget: the walk is {stats.pages / budget.requests:.1%} of one "
            f"{budget.period_s:g} s span's {budget.requests:,} requests, bounded by their number "
            f"(an answer holds {spec.KLINE_MAX_CANDLES:,} days) and their round trips ({trips}, "
            f"{slots} in flight at once), here by {side} the candles: CPU busy "
            f"{theirs_busy:.0%} of the walk in the simulator, {ours_busy:.0%} in ours"
        )
    return Figure(
        SECTION,
        f"prices walk, {markets} markets' daily candles, {years} year(s): requests/s",
        stats.pages_per_s,
        "requests/s",
        budget.per_second,
        f"budget {budget.requests:,} requests / {budget.period_s:g} s",
        f"{share:.1%} of the budget's rate while walking; {stats.pages} requests, "
        f"{stats.rows:,} candles in {stats.elapsed_s:.2f} s against the pacer's floor of "
        f"{floor_s:.2f} s (a burst of {burst}, then {pacer.rate(op):.0f} a second); {limited} "
        f"answers 429; {bound}",
    )


@contextmanager
def _distant(sim: SpawnedSimulator) -> Iterator[None]:
    """Every answer a round trip away (`DISTANCE`) for the duration; loopback's again after."""
    sim.control("latency", round_trip_s=DISTANCE.round_trip_s, jitter_s=DISTANCE.jitter_s)
    try:
        yield
    finally:
        sim.control("latency")


def _distant_figure(what: str, near: WalkStats, far: WalkStats, rate_limited: int) -> Figure:
    """A paced walk at `DISTANCE` against itself on loopback: pages a second, and how many
    requests were in flight on average (pages/s x round trip)."""
    trip = DISTANCE.round_trip_s
    return Figure(
        SECTION, f"  {what}, budgets on, {trip * 1000:g} ms a round trip: pages/s",
        far.pages_per_s, "pages/s", near.pages_per_s, "the same walk on loopback",
        f"{far.pages} pages in {far.elapsed_s:.1f} s; {rate_limited} answers 429; "
        f"{far.pages_per_s * trip:.1f} requests in flight on average, where one at a time "
        f"would read {1 / trip:.0f} pages/s",
    )  # fmt: skip


def _budget_figures(
    what: str, operation: spec.Operation, stats: WalkStats, rate_limited: int
) -> list[Figure]:
    budget = operation.budget
    share = stats.pages_per_s / budget.per_second
    budget_text = f"{budget.requests}/{budget.period_s:g} s"
    short = (
        f"; a walk of {stats.elapsed_s:.1f} s, shorter than the budget's {budget.period_s:g} s: "
        f"the pacer's opening burst ({Pacer().burst_of(operation)} requests) counts too"
        if stats.elapsed_s < budget.period_s
        else ""
    )
    return [
        Figure(
            SECTION,
            f"{what}, budgets on: pages/s",
            stats.pages_per_s,
            "pages/s",
            budget.per_second,
            f"budget {budget_text}",
            f"{share:.1%} of the budget; {stats.pages} pages; {rate_limited} answers 429{short}",
        ),
        Figure(SECTION, f"{what}, budgets on: rows/s", stats.rows_per_s, "rows/s"),
        Figure(
            SECTION,
            f"{what}, budgets on: 429 answers",
            rate_limited,
            "answers",
            note="lower is better; 0 means the pacing never crossed the budget",
        ),
    ]


def run() -> list[Figure]:
    """Measure, print nothing, return the figures."""
    figures: list[Figure] = []
    sim = spawn(scale="large", frozen_at=FROZEN_AT, cpu=0)
    with sim, _on_cpu(1):
        creds = Credentials(sim.credentials.api_key, sim.credentials.api_secret)
        since = _since_for_pages(sim, creds, FUNDING_PAGES)

        # (a) the spec's budgets on: a fresh pacer with the spec's budgets.
        before = _rate_limited(sim)
        paced = asyncio.run(_funding_walk(sim, creds, since, Pacer()))
        figures += _budget_figures("funding walk", FUNDING, paced, _rate_limited(sim) - before)
        before = _rate_limited(sim)
        with _distant(sim):
            far = asyncio.run(_funding_walk(sim, creds, since, Pacer()))
        figures.append(_distant_figure("funding walk", paced, far, _rate_limited(sim) - before))

        # (b) budgets off: our walk against the plain sequential loop over the same pages.
        sim.control("limits", enabled=False)
        walks, loops, served_s = [], [], 0.0
        for _ in range(REPEATS):
            cpu_before = _cpu_seconds(sim)
            walks.append(asyncio.run(_funding_walk(sim, creds, since, pacing=False)))
            served_s += _cpu_seconds(sim) - cpu_before
            # Our window nonces may run ahead of the clock (never past the exchange's window);
            # the loop's strictly increasing ones must start after them, as on the exchange.
            time.sleep(spec.NONCE_WINDOW_MS / 1000)
            loops.append(_plain_loop(sim, creds, walks[-1].pages))
        free = max(walks, key=lambda r: r.pages_per_s)
        plain_s, plain_rows = min(loops)
        figures += [
            Figure(
                SECTION,
                "funding walk, unthrottled: pages/s",
                free.pages_per_s,
                "pages/s",
                free.pages / plain_s,
                "sequential httpx.Client loop",
                f"{free.pages} pages each; best of {REPEATS}",
            ),
            Figure(
                SECTION,
                "funding walk, unthrottled: rows/s",
                free.rows_per_s,
                "rows/s",
                plain_rows / plain_s,
                "sequential httpx.Client loop",
                "ours drops one overlap row per page",
            ),
            Figure(
                "simulator",
                "funding pages of 100 served per second of one core",
                sum(w.pages for w in walks) / served_s,
                "pages/s",
                1_500,
                "the floor it must serve above",
                f"{sum(w.pages for w in walks)} pages in {served_s:.2f} s of the simulator's CPU "
                "time (user + system), during the unthrottled walks",
            ),
        ]

        # (c) the investments walk at the large scale (it must split by ticker).
        sim.control("limits", enabled=True)
        before = _rate_limited(sim)
        paced = asyncio.run(_investments_walk(sim, creds, Pacer()))
        figures += _budget_figures(
            "investments walk", INVESTMENTS, paced, _rate_limited(sim) - before
        )
        before = _rate_limited(sim)
        with _distant(sim):
            far = asyncio.run(_investments_walk(sim, creds, Pacer()))
        figures.append(_distant_figure("investments walk", paced, far, _rate_limited(sim) - before))
        sim.control("limits", enabled=False)
        free = asyncio.run(_investments_walk(sim, creds, pacing=False))
        figures += [
            Figure(SECTION, "investments walk, unthrottled: pages/s", free.pages_per_s, "pages/s"),
            Figure(
                SECTION,
                "investments walk, unthrottled: rows/s",
                free.rows_per_s,
                "rows/s",
                note=f"{free.rows} investments in {len(free.slices)} slices",
            ),
        ]

        # (d) the prices walk, the spec's budgets on.
        sim.control("limits", enabled=True)
        for years in PRICES_YEARS:
            before = _rate_limited(sim)
            walked = asyncio.run(_prices_walk(sim, years))
            figures.append(_prices_figure(years, walked, _rate_limited(sim) - before))
    return figures
