"""`make bench`, the workers section: a night of three accounts (a main account and two
sub-accounts of the large scale, under the spec's budgets) run by the nightly service, its runs
on two Celery workers (`whitebit-etl serve --workers 2`) against the same service launching them
itself, side by side in one run.

Both services are as production runs them: the instance on PostgreSQL (`tests.support.postgres`),
the warehouse on S3 (moto's server, `tests.support.s3.MotoS3`), the schedule firing once, at the
first whole minute after the service is up. Each night is timed from its tick (as the instance
recorded it) to the end of its last run, so the wait for the minute does not count; the simulator
counts the requests it refused for a budget (429). Everything runs on this one machine: the workers
add no cores, so what the figure shows is what Celery's placement costs, not what more machines
would gain.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, TypeVar

import dagster as dg
import httpx

from assets.instance import POSTGRES_URL_ENV
from bench import Figure
from bench.accounts import accounts_file
from pipeline.simulator import SpawnedSimulator, spawn
from tests.support.postgres import LocalPostgres
from tests.support.s3 import MotoS3

T = TypeVar("T")

SECTION: Final = "workers"
SUBACCOUNTS: Final = 2
#: A nightly schedule's tick asks each account for two runs.
RUNS: Final = 2 * (1 + SUBACCOUNTS)
TIMEOUT_S: Final = 600.0
#: How long the service may take to start, at most, on a busy machine.
START_S: Final = 60


def _night(
    sim: SpawnedSimulator, base: Path, env: dict[str, str], workers: int
) -> tuple[float, int]:
    """One service's first night: (seconds from the tick to its last run's end, answers 429)."""
    home = base / f"dagster-{workers}"
    # One tick: the next whole minute that leaves the service time to start (a schedule asks
    # again at every tick, so a cron of every minute would start a second night a minute later).
    tick = (datetime.now(UTC) + timedelta(seconds=START_S + 60)).replace(second=0)
    env = env | {"DAGSTER_HOME": str(home), "WHITEBIT_NIGHTLY_CRON": f"{tick:%M %H} * * *"}
    port = _port()
    log = (base / f"serve-{workers}.log").open("wb")
    service = subprocess.Popen(  # noqa: S603 - our interpreter, our command, no shell
        [sys.executable, "-m", "assets.cli", "serve", "--port", str(port),
         "--workers", str(workers)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    # This process reads the service's instance too, whose storage names the variable.
    os.environ[POSTGRES_URL_ENV] = env[POSTGRES_URL_ENV]
    try:
        _wait(lambda: _serving(port), service, "the service to serve")
        sim.stats(reset=True)
        records = _wait(lambda: _ended_runs(home), service, "the night's runs to end")
        limited = int(sim.stats()["rate_limited"])
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(service.pid, signal.SIGKILL)
            service.wait()
        log.close()
        del os.environ[POSTGRES_URL_ENV]
    failed = [r.dagster_run.run_id for r in records if r.dagster_run.status.value != "SUCCESS"]
    if failed:
        raise RuntimeError(f"runs failed with {workers} workers: {failed}; see {log.name}")
    ticked = min(r.create_timestamp.timestamp() for r in records)
    return max(r.end_time or 0.0 for r in records) - ticked, limited


def _port() -> int:
    from assets.service import free_port

    return free_port()


def _serving(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ended_runs(home: Path) -> list[dg.RunRecord] | None:
    """The night's account runs, once they have all ended (the report's run is not one)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = [
            r for r in instance.get_run_records() if "whitebit/account" in r.dagster_run.tags
        ]
    if len(records) < RUNS or not all(r.dagster_run.is_finished for r in records):
        return None
    return records


def _wait(probe: Callable[[], T | None], service: subprocess.Popen[bytes], what: str) -> T:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        found = probe()
        if found:
            return found
        if service.poll() is not None:
            raise RuntimeError(f"the service exited ({service.returncode}) waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no end of {what} in {TIMEOUT_S:.0f} s")
        time.sleep(1)


def run() -> list[Figure]:
    # The data clock runs with the wall clock: yesterday is a whole day, whenever the tick comes.
    sim = spawn(scale="large", subaccounts=SUBACCOUNTS)
    with (
        sim,
        tempfile.TemporaryDirectory() as scratch,
        LocalPostgres() as postgres,
        MotoS3(Path(scratch) / "moto.log") as store,
    ):
        base = Path(scratch)
        path, secrets = accounts_file(sim, base / "accounts.yaml", SUBACCOUNTS)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WHITEBIT_", "DAGSTER_", "WAREHOUSE_", "AWS_", "CELERY_"))
        }
        env |= (
            secrets
            | store.env
            | {
                "WHITEBIT_ACCOUNTS_FILE": str(path),
                "XDG_STATE_HOME": str(base / "state"),
            }
        )
        nights = {}
        for workers in (2, 0):
            night_env = env | {
                "WAREHOUSE_ROOT": f"s3://{store.bucket()}/warehouse",
                POSTGRES_URL_ENV: postgres.url(postgres.new_database()),
                "WHITEBIT_PACING_DIR": str(base / f"pacing-{workers}"),
            }
            nights[workers] = _night(sim, base, night_env, workers)
    (celery_s, celery_429), (alone_s, alone_429) = nights[2], nights[0]
    return [
        Figure(SECTION, f"a night of 3 accounts ({RUNS} runs), on 2 Celery workers against the "
               "service alone", celery_s, "s", alone_s, "the service launching its runs itself",
               f"from the tick to the last run's end, one machine (2 cores); answers 429: "
               f"{celery_429} on the workers, {alone_429} alone; lower is better"),
    ]  # fmt: skip


if __name__ == "__main__":
    for figure in run():
        print(figure)
