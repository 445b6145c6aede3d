"""After the whole session, no API secret appears in any file, log record, captured output or
failure text.

This test runs last (marked ``after_all``; `tests.conftest` orders it after every other test the
session collected). From the session's first test on, `tests.leaks` recorded every secret handed
out (simulator keys, their resets, spawned simulators, every `Credentials` a test made) and read
every log record and every report's captured output and failure text. Here it adds a small
workload of its own, so that it proves something even when run alone: the real CLI in child
processes with a secret in their environment, as a user sets it, one run succeeding and one
failing (a key without B2B access: an error text), their output in log files. Then it reads every
file under pytest's base temp directory: Parquet (values decoded), DuckDB catalogs (opened),
Dagster's storage (SQLite) and event logs, the CLI children's output, anything else as bytes.

``make test`` runs most of the suite in an earlier session, on several processes: each read its own
log records and reports for the secrets it had recorded, and saved its ledger
(`tests.conftest.earlier_sessions`). This scan takes in their secrets and sightings, and reads
the files under their base temp directories too, for the secrets of all of them.

Spawned simulators print their demo secret on their own console by design (``whitebit-etl
simulator`` is the exchange's console, not a pipeline log): `pipeline.simulator.spawn` reads it
from a pipe and keeps no copy, and no test writes it anywhere. Were one to write it to a file
under the base temp, this scan would find it, and should.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipeline.simulator import Scale, SimClock, Simulator
from tests.support.cli_runs import cli_env, run_cli
from tests.support.leaks import LEDGER, files_holding
from tests.support.simulated import FROZEN_AT

pytestmark = pytest.mark.after_all


def test_no_secret_anywhere_after_the_whole_session(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    earlier_sessions: list[Path],
) -> None:
    assert request.session.items[-1] is request.node, "the scan must run after every other test"
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        root, home = tmp_path / "warehouse", tmp_path / "dagster"
        ok = run_cli(
            ["materialize", "funding_history", "--partition", "2026-09-12"],
            cli_env(sim, root, home),
            tmp_path / "logs" / "funding",
        )
        assert ok.process.returncode == 0, ok.output
        refused = run_cli(
            ["materialize", "investments"],
            cli_env(sim, root, home, credentials=sim.credentials_for("no_b2b")),
            tmp_path / "logs" / "refused",
        )
        assert refused.process.returncode == 1
        assert "You don't have permission to use this endpoint" in refused.output
        handed = {sim.credentials_for(role).api_secret for role in ("partner", "no_b2b")}
    assert handed <= LEDGER.secrets()

    scanned = Counter(kind for _, kind in files_holding(LEDGER, tmp_path_factory.getbasetemp()))
    for basetemp in earlier_sessions:
        scanned.update(kind for _, kind in files_holding(LEDGER, basetemp))
    names = {path.name for path, _ in files_holding(LEDGER, tmp_path)}
    # What was read: the warehouse, its catalog, Dagster's storage and the CLI's own output.
    assert scanned["parquet"] >= 1, scanned
    assert scanned["duckdb"] >= 1, scanned
    assert {"runs.db", "index.db", "funding.out", "refused.err"} <= names, names
    seen = "\n".join(f"{secret} in {where}" for where, secret in LEDGER.sightings)
    assert not LEDGER.sightings, f"secrets (shortened) seen:\n{seen}"
