"""Where an account's rows come from (`warehouse.sources`), through the real command: the demo
has a warehouse of its own; a warehouse holds the embedded simulator's rows or real ones, and a
run of the other kind is refused in one line before any request (the command's, the code
location's alike); an account's source is recorded when its first rows land, so a first run
that failed locks nothing, and `move-account` moves an account whose exchange moved."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import pytest

from assets.settings import Settings
from pipeline.simulator import Simulator
from tests.support.cli_runs import cli_env, invoke
from tests.support.dagster_runs import asset, resources_for
from warehouse import Warehouse, sources

SIMULATED = "the embedded simulator (seed 7, global)"


def _asked(sim: Simulator) -> int:
    """The requests the simulator has answered so far."""
    return sum(sim.state.answered.values())


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and modification time: what a root untouched
    keeps."""
    return {
        str(path.relative_to(root)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _no_account(root: Path, home: Path) -> dict[str, str]:
    """The environment of a user who configured no account (the embedded simulator's demo
    accounts), with this warehouse and Dagster home."""
    return {"WAREHOUSE_ROOT": str(root), "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def _one_error(output: str) -> str:
    (line,) = [row for row in output.splitlines() if row.startswith("Error:")]
    assert "Traceback" not in output, output
    return line


@pytest.fixture(scope="module")
def real(sim: Simulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real single-account warehouse (account ``default``: the simulator over loopback, with
    credentials, as a real exchange is reached), its Dagster home elsewhere."""
    base = tmp_path_factory.mktemp("real")
    done = invoke(["materialize", "hedge_mode"], cli_env(sim, base / "data", base / "home"))
    assert done.exit_code == 0, done.output
    return base / "data"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of the embedded simulator's main account."""
    base = tmp_path_factory.mktemp("simulated")
    env = _no_account(base / "data", base / "home")
    done = invoke(["materialize", "hedge_mode", "--account", "main"], env)
    assert done.exit_code == 0, done.output
    return base / "data"


def test_the_demo_has_its_own_warehouse_and_never_writes_into_a_real_one(
    real: Path, sim: Simulator, tmp_path: Path
) -> None:
    """Problem 1 as written: a real single-account warehouse ``default``, then the demo: by
    default it writes elsewhere; pointed at the real root, it is refused in one line naming the
    warehouse, the account and both kinds, before any run, and the root is left as it was."""
    assert Settings.from_env({}).root == "./data-demo"
    assert Settings.from_env({"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s"}).root == "./data"
    assert Settings.from_env({"WAREHOUSE_ROOT": "elsewhere"}).root == "elsewhere"
    before, asked = _files(real), _asked(sim)
    runs = {
        ("demo",): "main",
        ("materialize",): "main",
        ("materialize", "hedge_mode", "--account", "sub_1"): "sub_1",
    }
    for args, account in runs.items():
        done = invoke(list(args), _no_account(real, tmp_path / "home"))
        assert done.exit_code == 1, done.output
        assert re.search(
            rf"^Error: the warehouse at {re.escape(str(real))} holds real rows \(account default, "
            rf"from {re.escape(sim.url)}\); this run would add simulated ones \(account {account}, "
            rf"from {re.escape(SIMULATED)}\): a warehouse holds the embedded simulator's rows "
            r"or real ones, never both",
            _one_error(done.output),
        ), done.output
        assert not (tmp_path / "home").exists(), args  # refused before any run
    assert _files(real) == before
    assert sources.recorded(Warehouse.open(real)) == {"default": sources.Source.address(sim.url)}
    assert _asked(sim) == asked


def test_a_warehouse_of_one_kind_refuses_every_run_of_the_other(
    simulated: Path, sim: Simulator, tmp_path: Path
) -> None:
    """A real account's run into the embedded simulator's warehouse: refused by the command in
    one line before any run, and by a run of the code location (as the UI or a schedule
    launches it) before any request."""
    before, asked = _files(simulated), _asked(sim)
    done = invoke(["materialize", "hedge_mode"], cli_env(sim, simulated, tmp_path / "home"))
    line = _one_error(done.output)
    assert done.exit_code == 1
    assert re.search(
        rf"^Error: the warehouse at {re.escape(str(simulated))} holds simulated rows \(account "
        rf"main, from {re.escape(SIMULATED)}\); this run would add real ones \(account default, "
        rf"from {re.escape(sim.url)}\)",
        line,
    ), line
    assert not (tmp_path / "home").exists()
    ran = dg.materialize(
        [asset("hedge_mode")], resources=resources_for(sim, simulated), raise_on_error=False
    )
    assert not ran.success
    (failure,) = [str(e.step_failure_data) for e in ran.all_events if e.is_step_failure]
    assert "SourceMismatch: the warehouse at" in failure
    assert "holds simulated rows (account main" in failure
    assert _files(simulated) == before
    assert _asked(sim) == asked


def test_a_first_run_that_failed_records_nothing_and_a_moved_exchange_is_moved(
    sim: Simulator, tmp_path: Path
) -> None:
    """Problem 3 as written: a first run against ``http://whitebit.com`` (refused: "use
    https://"), then one against a dead address, record nothing, and the right address then
    works; an account filled from ``127.0.0.1`` is refused at ``localhost`` (one line, before
    any request, saying how to move it) until `move-account` moves it, its rows kept."""
    root, home = tmp_path / "data", tmp_path / "home"
    wh = Warehouse.open(root)
    port = sim.url.rpartition(":")[2]
    assert sim.url == f"http://127.0.0.1:{port}"

    def run(url: str) -> str:
        env = cli_env(sim, root, home, histories=["hedge_mode"]) | {"WHITEBIT_BASE_URL": url}
        done = invoke(["materialize", "hedge_mode"], env)
        assert (done.exit_code == 0) == (url in (sim.url, f"http://localhost:{port}")), done.output
        return done.output

    assert "https://" in run("http://whitebit.com")
    assert sources.recorded(wh) == {}
    run("http://127.0.0.1:1")
    assert sources.recorded(wh) == {}
    run(sim.url)
    assert sources.recorded(wh) == {"default": sources.Source.address(sim.url)}
    rows = _files(root / "parquet" / "hedge_mode")

    asked = _asked(sim)
    localhost = f"http://localhost:{port}"
    env = cli_env(sim, root, home, histories=["hedge_mode"]) | {"WHITEBIT_BASE_URL": localhost}
    refused = invoke(["materialize", "hedge_mode"], env)
    assert refused.exit_code == 1
    assert _asked(sim) == asked  # before any request
    assert (
        f"account default of the warehouse at {root} was filled from {sim.url}; this run reads "
        f"{localhost}." in refused.output
    )
    assert "`whitebit-etl move-account default --to <its address>`" in refused.output

    mistakes = {
        ("nobody", "--to", localhost): "Error: account nobody of the warehouse at "
        f"{root} has no rows recorded (accounts with rows: default)",
        ("default", "--to", "s3cr3t-pasted"): "Error: Invalid value for --to: give global, eu or "
        "an http(s) URL",
        ("S3CR3T", "--to", localhost): "Error: Invalid value for ACCOUNT: not an account name",
    }
    for args, said in mistakes.items():
        done = invoke(["move-account", *args], env)
        assert done.exit_code in (1, 2)
        assert _one_error(done.output).startswith(said), done.output
        assert "s3cr3t" not in done.output.lower()
    moved = invoke(["move-account", "default", "--to", localhost], env)
    assert moved.exit_code == 0, moved.output
    assert f"moved from {sim.url} to {localhost}" in moved.output
    assert _files(root / "parquet" / "hedge_mode") == rows  # rows kept as they were
    run(localhost)
    assert sources.recorded(wh) == {"default": sources.Source.address(localhost)}
