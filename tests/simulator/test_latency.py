"""The exchange's distance: each answer a round trip away, answers in flight overlapping, the
jitter within its bound and the same for a seed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest
from click.testing import CliRunner

from pipeline import spec
from pipeline.simulator import Latency, Simulator, simulator_command
from pipeline.simulator._latency import RoundTrips
from tests.support.signing import post, sign

ROUND_TRIP = 0.2
FUNDING = spec.FUNDING_HISTORY.path


async def _at_once(sim: Simulator, requests: int) -> list[int]:
    """``requests`` funding pages asked at once (window nonces: they may arrive in any order)."""
    signed = [sign(FUNDING, {"limit": 5}, sim.credentials, window=True) for _ in range(requests)]
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        answers = await asyncio.gather(
            *(client.post(FUNDING, content=raw, headers=headers) for raw, headers in signed)
        )
    return [a.status_code for a in answers]


def test_each_answer_takes_its_round_trip_and_answers_in_flight_overlap(own_sim: Simulator) -> None:
    assert own_sim.latency == Latency()
    own_sim.latency = Latency(ROUND_TRIP)
    asks: list[Callable[[], httpx.Response]] = [
        lambda: httpx.get(own_sim.url + spec.PING.path, timeout=10),  # public
        lambda: post(own_sim.url, FUNDING, {"limit": 5}, own_sim.credentials),  # private
        lambda: httpx.get(own_sim.url + "/api/v4/no-such-route", timeout=10),  # refused
    ]
    for ask in asks:
        started = time.monotonic()
        status = ask().status_code
        assert time.monotonic() - started >= ROUND_TRIP - 0.01, status
    # The simulator's own controls are no part of the exchange: answered at once.
    started = time.monotonic()
    httpx.get(own_sim.url + "/_simulator/stats", timeout=10)
    assert time.monotonic() - started < ROUND_TRIP / 2
    # Five at once take about one round trip, as on a network, not five.
    started = time.monotonic()
    assert asyncio.run(_at_once(own_sim, 5)) == [200] * 5
    elapsed = time.monotonic() - started
    assert ROUND_TRIP - 0.01 <= elapsed < 2.5 * ROUND_TRIP
    own_sim.latency = Latency()
    started = time.monotonic()
    assert httpx.get(own_sim.url + spec.PING.path, timeout=10).status_code == 200
    assert time.monotonic() - started < ROUND_TRIP / 2


def test_round_trips_are_drawn_within_the_jitter_the_same_for_a_seed() -> None:
    latency = Latency(0.1, 0.02)

    def drawn(seed: int) -> list[float]:
        trips = RoundTrips(seed, latency)
        return [trips.next() for _ in range(500)]

    first = drawn(7)
    assert all(0.08 <= trip <= 0.12 for trip in first)
    # The whole band, not one value.
    assert min(first) < 0.085
    assert max(first) > 0.115
    assert drawn(7) == first
    assert drawn(8) != first
    trips = RoundTrips(7, latency)
    trips.next()
    trips.latency = latency  # set again: its stream starts again from the seed
    assert trips.next() == first[0]
    assert RoundTrips(7, Latency(0.1)).next() == 0.1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--latency", "0.1", "--jitter", "0.2"], "exceeds its round trip"),
        (["--latency", "-1"], "0 or more"),
        (["--latency", "inf"], "0 or more"),
        (["--latency", "fast"], "is not a valid float"),
    ],
)
def test_a_bad_latency_is_one_clear_line(args: list[str], words: str) -> None:
    done = CliRunner().invoke(simulator_command, args)
    assert done.exit_code == 2
    error = done.output.strip().splitlines()[-1]
    assert "--latency" in error, done.output
    assert words in error, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
