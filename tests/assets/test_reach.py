"""A history the exchange forgets after six months is asked for back to the floor the exchange
reckons from its own clock, not this machine's: a simulator whose present is two months behind
the machine's still answers (and the run loads) the days between the two floors, and the days
past its own floor are never asked for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SimClock, Simulator
from tests.support.dagster_runs import asset, resources_for
from warehouse import Warehouse, catalog

#: The simulator's present (2026-09-21): its floor is 2026-03-21, whatever day the suite runs.
PRESENT = datetime.fromtimestamp(EPOCH, UTC)
FLOOR = spec.floor_day(PRESENT.date())


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(seed=7, scale=Scale.parse("days=200,fills=20"), clock=SimClock(EPOCH)) as s:
        yield s


def _run(sim: Simulator, root: Path, first: date, last: date) -> dg.ExecuteInProcessResult:
    trades = asset(spec.TRADES.name)
    days = {"first_day": first.isoformat(), "last_day": last.isoformat()}
    sim.state.reset_counts()
    return dg.materialize(
        [trades],
        resources=resources_for(sim, root),
        partition_key=f"{first:%Y-%m}",
        run_config={"ops": {trades.node_def.name: {"config": days}}},
    )


def _fills_asked(sim: Simulator) -> int:
    path = spec.TRADES.operation.path
    return sum(n for (asked, _), n in sim.state.answered.items() if asked == path)


def test_the_days_after_the_exchanges_floor_are_loaded(sim: Simulator, tmp_path: Path) -> None:
    first, last = FLOOR, FLOOR.replace(day=FLOOR.day + 2)
    assert spec.floor_day(datetime.now(UTC).date()) > last, "this machine's floor is later"
    result = _run(sim, tmp_path, first, last)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    assert "days_past_the_exchange" not in event.materialization.metadata
    with catalog.connect(Warehouse.open(tmp_path)) as con:
        found = con.execute(
            "SELECT min(trade_date), max(trade_date), count(*) FROM trades"
        ).fetchone()
    assert found is not None
    assert (found[0], found[1]) == (first, last)
    assert found[2] == event.materialization.metadata["dagster/row_count"].value > 0
    assert _fills_asked(sim) > 0


def test_the_days_past_the_exchanges_floor_are_never_asked_for(
    sim: Simulator, tmp_path: Path
) -> None:
    first, last = FLOOR.replace(day=FLOOR.day - 3), FLOOR.replace(day=FLOOR.day - 1)
    result = _run(sim, tmp_path, first, last)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["days_past_the_exchange"].value == 3
    assert _fills_asked(sim) == 0
    # Its checks are evaluated, of nothing written, and pass.
    evaluations = result.get_asset_check_evaluations()
    assert evaluations
    assert all(e.passed for e in evaluations)
