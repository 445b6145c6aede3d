"""The simulator as a user starts it: `whitebit-etl simulator`, in its own process."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from pipeline import spec
from pipeline.simulator import Latency, spawn
from tests.support.signing import post
from tests.support.simulated import FROZEN_AT


def test_spawned_simulator_prints_its_url_and_demo_credentials() -> None:
    with spawn(seed=7, scale="markets=2,days=3,investments=20", frozen_at=FROZEN_AT) as sim:
        assert sim.url.startswith("http://127.0.0.1:")
        assert httpx.get(sim.url + spec.PING.path).json() == ["pong"]
        r = post(sim.url, spec.MAIN_BALANCE.path, {}, sim.credentials)
        assert r.status_code == 200
        assert "USDT" in r.json()
        sim.control("faults", script=["http_503"])
        assert httpx.get(sim.url + spec.PING.path).status_code == 503
        sim.control("tamper", path=spec.HEDGE_MODE.path, kind="new_field", name="x", where="top")
        assert post(sim.url, spec.HEDGE_MODE.path, {}, sim.credentials).json()["x"] is None
        sim.control("tamper", path=spec.HEDGE_MODE.path, kind=None)
        assert "x" not in post(sim.url, spec.HEDGE_MODE.path, {}, sim.credentials).json()
        sim.control("limits", page_cap=2)
        page = post(sim.url, spec.FUNDING_HISTORY.path, {"limit": 9}, sim.credentials).json()
        assert (page["limit"], len(page["records"])) == (2, 2)
        sim.control("latency", round_trip_s=0.2, jitter_s=0.05)
        started = time.monotonic()
        assert httpx.get(sim.url + spec.PING.path).status_code == 200
        assert time.monotonic() - started >= 0.15
    assert sim.process.returncode is not None


def test_a_simulator_started_with_a_page_cap_and_a_latency_answers_so() -> None:
    scale = "markets=2,days=3,investments=20"
    latency = Latency(0.2, 0.05)
    with spawn(seed=7, scale=scale, frozen_at=FROZEN_AT, page_cap=4, latency=latency) as sim:
        started = time.monotonic()
        page = post(sim.url, spec.FUNDING_HISTORY.path, {}, sim.credentials).json()
        assert time.monotonic() - started >= 0.15
        assert (page["limit"], len(page["records"])) == (4, 4)


def test_bad_scale_is_a_clear_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "assets.cli", "simulator", "--scale", "huge"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "--scale" in done.stderr
    assert "huge" in done.stderr
