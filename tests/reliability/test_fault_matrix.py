"""With each fault of the simulator switched on, the nightly job leaves the fault-free warehouse.

Each case runs the nightly workload (a funding range and today's snapshots, through Dagster, real
resources, the client's default retries) against a simulator faulting a good share of its
answers with one kind of fault, or with every kind at once at 20%; the warehouse it leaves is
compared with a fault-free run's, every table row for row (all columns but ``extracted_at``).
The faults are seeded, so a case replays the same draws (up to the order concurrent requests
arrive in).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.simulator import Fault, Scale, SimClock, Simulator
from tests.conftest import FROZEN_AT
from tests.reliability.conftest import FUNDING_DAYS, Rows, failures, nightly, warehouse_rows

#: Share of requests faulted in the single-kind cases: often enough that nearly every walk meets
#: its fault, rarely enough that the client's 8 retries never run out (0.3**9: 2 in 100,000).
ONE_KIND = 0.3
ALL_KINDS = 0.2
SLOW_S = 0.05


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    root = tmp_path_factory.mktemp("fault-free") / "warehouse"
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        for result in nightly(sim, root):
            assert result.success, failures(result)
            assert failures(result) == []
        assert sim.faults.injected.total() == 0
    rows = warehouse_rows(root)
    # The workload is worth comparing: every table has rows, funding every day of the range.
    assert all(rows[table] for table in rows if table != "_rejects"), rows.keys()
    assert {r[-1] for r in rows["funding_history"]} == set(FUNDING_DAYS)
    return rows


@pytest.mark.parametrize(
    ("kinds", "probability"),
    [*(([kind], ONE_KIND) for kind in Fault), (list(Fault), ALL_KINDS)],
    ids=[*(kind.value for kind in Fault), "all-at-20%"],
)
def test_the_nightly_warehouse_is_the_fault_free_one(
    own_sim: Simulator, tmp_path: Path, fault_free: Rows, kinds: list[Fault], probability: float
) -> None:
    own_sim.faults.set(probability, kinds, seed=len(kinds), slow_seconds=SLOW_S)
    root = tmp_path / "warehouse"
    for result in nightly(own_sim, root):
        assert result.success, failures(result)
        assert failures(result) == []  # every check passed, blocking or not
    injected = own_sim.faults.injected
    if len(kinds) == 1:
        assert injected[kinds[0]] >= 2, injected
    else:  # a nightly makes a few dozen requests: a fifth of them faulted, of several kinds
        assert len(injected) >= 3, injected
    rows = warehouse_rows(root)
    for table, expected in fault_free.items():
        assert rows[table] == expected, table
