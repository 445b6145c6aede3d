"""The exchange's distance: every answer a network's round trip away, give or take its jitter.

On loopback the simulator answers in well under a millisecond; the real service is tens of
milliseconds away. With a `Latency` set, each request waits half its round trip before the app
sees it (its way there: the rate budgets count it then) and the other half before its answer
leaves (its way back). The waits are the event loop's sleeps, so requests in flight overlap as
on a network. Each round trip is drawn uniformly within the jitter from a stream seeded by the
simulator's seed: a run asks the same round trips in the same order. With jitter, requests sent
closer together than it may arrive in another order, as on a network.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True, slots=True)
class Latency:
    """A round trip in seconds, each one drawn within ``jitter_s`` either side of it (0: none)."""

    round_trip_s: float = 0.0
    jitter_s: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("round trip", self.round_trip_s), ("jitter", self.jitter_s)):
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"a latency's {name} is seconds, 0 or more, not {value!r}")
        if self.jitter_s > self.round_trip_s:
            raise ValueError(
                f"a latency's jitter ({self.jitter_s:g} s) exceeds its round trip "
                f"({self.round_trip_s:g} s): a round trip would take less than nothing"
            )


class RoundTrips:
    """The round trips of the answers to come, one after another: the latency set (none at
    first) and its stream of draws, started again from the seed whenever it is set."""

    def __init__(self, seed: int, latency: Latency | None = None) -> None:
        self._seed = seed
        self.latency = latency or Latency()

    @property
    def latency(self) -> Latency:
        return self._drawn[0]

    @latency.setter
    def latency(self, value: Latency) -> None:
        if not isinstance(value, Latency):
            raise TypeError(f"a latency is a Latency, not {value!r}")
        # One assignment: the server's thread draws while a test's thread may set it.
        self._drawn = (value, random.Random(self._seed))

    def next(self) -> float:
        """The next answer's round trip, in seconds."""
        latency, rng = self._drawn
        if not latency.jitter_s:
            return latency.round_trip_s
        return latency.round_trip_s + rng.uniform(-latency.jitter_s, latency.jitter_s)


class Distant:
    """ASGI middleware: each request of the exchange's routes takes its round trip (`RoundTrips`),
    half on its way in and half on its answer's way out; the routes under ``spared`` (the
    simulator's own controls, no part of the exchange) are answered at once."""

    def __init__(self, app: ASGIApp, trips: RoundTrips, spared: str) -> None:
        self.app, self.trips, self.spared = app, trips, spared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.spared):
            await self.app(scope, receive, send)
            return
        half = self.trips.next() / 2
        if not half:
            await self.app(scope, receive, send)
            return
        await asyncio.sleep(half)

        async def back(message: Message) -> None:
            if message["type"] == "http.response.start":
                await asyncio.sleep(half)
            await send(message)

        await self.app(scope, receive, back)
