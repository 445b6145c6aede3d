"""`whitebit-etl serve` stopped by Ctrl-C (SIGINT to its process group, as a terminal sends it)
while one run walks and another waits for the account's pool slot: every process it started ends
within 10 s, no traceback is printed, and both runs are canceled, none failed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from assets.service import LOCATION, left_after
from pipeline.simulator import SpawnedSimulator, spawn
from tests.support.cli_runs import cli_env
from tests.support.service import START_TIMEOUT_S, Service
from tests.support.simulated import FROZEN_AT

pytestmark = pytest.mark.slow

#: Each answer comes this late: the walk lasts well past the stop, and no request waits long
#: enough for its nonce to leave the exchange's window.
SLOW_ANSWER_S = 1.0
_LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""


def _launch(url: str, asset: str, tags: dict[str, str]) -> str:
    """A run of the ``nightly`` job of the account's ``asset``, launched as the UI launches it."""
    params: dict[str, Any] = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "jobName": "nightly",
            "assetSelection": [{"path": ["default", asset]}],
        },
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
    }
    answer = httpx.post(
        f"{url}/graphql", json={"query": _LAUNCH, "variables": {"p": params}}, timeout=60
    ).json()
    launched = answer["data"]["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", answer
    return str(launched["run"]["runId"])


@pytest.fixture
def exchange() -> Any:
    with spawn(seed=7, scale="small", frozen_at=FROZEN_AT) as sim:
        yield sim


def test_ctrl_c_stops_every_process_within_10_s_and_cancels_the_runs(
    exchange: SpawnedSimulator, tmp_path: Path
) -> None:
    env = cli_env(exchange, tmp_path / "warehouse", tmp_path / "dagster")
    served = Service(env, tmp_path / "logs" / "serve")
    try:
        served.start()
        exchange.control("faults", probability=1.0, kinds=["slow"], slow_seconds=SLOW_ANSWER_S)
        runs = [
            _launch(served.url, "funding_history", {"dagster/partition": "2026-09"}),
            _launch(served.url, "hedge_mode", {}),
        ]
        deadline = time.monotonic() + START_TIMEOUT_S
        with dg.DagsterInstance.from_config(served.home) as instance:
            while not any(
                (run := instance.get_run_by_id(run_id)) is not None
                and run.status == dg.DagsterRunStatus.STARTED
                for run_id in runs
            ):
                assert time.monotonic() < deadline, served.output()[-3000:]
                time.sleep(0.5)
        started = served.children()
        assert served.process is not None
        stopped_at = time.monotonic()
        os.killpg(served.process.pid, signal.SIGINT)
        code = served.process.wait(timeout=60)
        left = left_after(started, max(0.0, 10 - (time.monotonic() - stopped_at)))
        seconds = time.monotonic() - stopped_at
    finally:
        served.stop()

    output = served.output()
    assert code == 0, output[-3000:]
    assert seconds < 10, output[-3000:]
    assert left == [], [process.cmdline()[:3] for process in left]
    assert "whitebit-etl serve: stopped" in output
    assert "Traceback" not in output, output[-3000:]
    assert "Stack Trace" not in output, output[-3000:]
    with dg.DagsterInstance.from_config(served.home) as instance:
        statuses = [instance.get_run_by_id(run_id) for run_id in runs]
    assert [run.status if run else None for run in statuses] == [
        dg.DagsterRunStatus.CANCELED,
        dg.DagsterRunStatus.CANCELED,
    ]
