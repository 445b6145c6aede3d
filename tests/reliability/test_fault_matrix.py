"""With each fault of the simulator switched on, the nightly job leaves the fault-free warehouse,
or says which records it could not take and leaves it once the faults stop.

Each case runs the nightly workload (a funding range and today's snapshots, through Dagster, real
resources, the client's default retries) against a simulator faulting a good share of its
answers with one kind of fault, or with every such kind at once at 20%; the warehouse it leaves
is compared with a fault-free run's, every table row for row (all columns but ``extracted_at``).
The faults are seeded, so a case replays the same draws (up to the order concurrent requests
arrive in).

Two kinds change a record rather than an answer (a field missing, a number where a string
belongs): those records are data the exchange sent, so they are rejected, not retried. Their
case expects the altered records in ``_rejects``, the blocking ``no_rejects`` check failing, and
the fault-free warehouse once a rerun meets no fault.

In a warehouse of two accounts (an accounts file of the simulator's main account and a
sub-account, both loaded fault-free once for the module, each case on a copy), a night of one
account meeting faults (server errors the client retries; records altered into rejects) leaves
the other account's rows and files as they were, byte for byte, and its own rows are the
fault-free ones once a rerun meets no fault.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import location
from assets.jobs import AccountAssets
from assets.settings import Settings
from pipeline import spec
from pipeline.simulator import Fault, Scale, SimClock, Simulator
from tests.support.cli_runs import (
    FIRST,
    FUNDING_DAYS,
    LAST,
    SNAPSHOT_TABLES,
    TWO_ACCOUNTS,
    Rows,
    account_files,
    failures,
    nightly,
    two_accounts_env,
    warehouse_rows,
)
from tests.support.simulated import FROZEN_AT
from warehouse.root import CATALOG_FILE
from warehouse.schemas import month_of

#: Share of requests faulted in the single-kind cases: often enough that nearly every walk meets
#: its fault, rarely enough that the client's 8 retries never run out (0.3**9: 2 in 100,000).
ONE_KIND = 0.3
ALL_KINDS = 0.2
SLOW_S = 0.05
#: Faults that alter a record the exchange sends: data, not failures.
RECORD_LEVEL = (Fault.MISSING_FIELD, Fault.NUMBER_FOR_STRING)
#: Faults after which the warehouse is the fault-free one: every other kind. A field added
#: (EXTRA_FIELD) is tolerated: the rows load as without it.
KEPT = [kind for kind in Fault if kind not in RECORD_LEVEL]
DATA_PATHS = [op.path for op in spec.OPERATIONS if op.private]
#: The check that warns while the exchange sends fields the spec does not name: a warning, so
#: it may fail (not block) where EXTRA_FIELD was injected.
SCHEMA_DRIFT = ".schema_drift failed"


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    root = tmp_path_factory.mktemp("fault-free") / "warehouse"
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        for result in nightly(sim, root):
            assert result.success, failures(result)
            assert failures(result) == []
        assert sim.faults.injected.total() == 0
    rows = warehouse_rows(root)
    # The workload is worth comparing: every table it writes has rows (the histories it does
    # not run stay empty), funding every day of the range.
    written = ("funding_history", *SNAPSHOT_TABLES)
    assert all(rows[table] for table in written), {t: len(rows[t]) for t in written}
    assert rows["_rejects"] == []
    assert {r[-1] for r in rows["funding_history"]} == set(FUNDING_DAYS)
    return rows


@pytest.mark.parametrize(
    ("kinds", "probability"),
    [*(([kind], ONE_KIND) for kind in KEPT), (KEPT, ALL_KINDS)],
    ids=[*(kind.value for kind in KEPT), "all-at-20%"],
)
def test_the_nightly_warehouse_is_the_fault_free_one(
    own_sim: Simulator, tmp_path: Path, fault_free: Rows, kinds: list[Fault], probability: float
) -> None:
    own_sim.faults.set(probability, kinds, seed=len(kinds), slow_seconds=SLOW_S)
    root = tmp_path / "warehouse"
    for result in nightly(own_sim, root):
        assert result.success, failures(result)
        failed = failures(result)
        if Fault.EXTRA_FIELD in kinds:
            failed = [f for f in failed if not f.endswith(SCHEMA_DRIFT)]
        assert failed == []  # every other check passed, blocking or not
    injected = own_sim.faults.injected
    if len(kinds) == 1:
        assert injected[kinds[0]] >= 2, injected
    else:  # a nightly makes a few dozen requests: a fifth of them faulted, of several kinds
        assert len(injected) >= 3, injected
    rows = warehouse_rows(root)
    for table, expected in fault_free.items():
        assert rows[table] == expected, table


@pytest.mark.parametrize("kind", RECORD_LEVEL, ids=[kind.value for kind in RECORD_LEVEL])
def test_records_altered_are_rejected_then_a_clean_rerun_is_the_fault_free_warehouse(
    own_sim: Simulator, tmp_path: Path, fault_free: Rows, kind: Fault
) -> None:
    # The exchange's data, not its ping: a ping without "pong" is no record, and is refused.
    own_sim.faults.set(ONE_KIND, [kind], paths=DATA_PATHS, seed=1)
    root = tmp_path / "warehouse"
    results = nightly(own_sim, root)
    assert own_sim.faults.injected[kind] >= 2
    rows = warehouse_rows(root)
    rejected = rows.pop("_rejects")
    assert rejected, "an altered record reached a table or vanished"
    for table, _partition, _index, raw, reason, *_ in rejected:
        assert table in fault_free, table
        # The record as sent, and why: the field that went, or the number where a string was.
        assert json.loads(raw) is not None
        if kind is Fault.MISSING_FIELD:
            assert ": missing" in reason, reason
        else:
            assert re.search(r"\w: \w+ where .+ belongs", reason), reason
    for table, kept in rows.items():
        assert all(row in fault_free[table] for row in kept), table  # none changed or made up
    blocked = {
        e.asset_key.path[-1]
        for result in results
        for e in result.get_asset_check_evaluations()
        if e.check_name == "no_rejects" and not e.passed
    }
    assert blocked == {row[0] for row in rejected}

    own_sim.faults.clear()
    for result in nightly(own_sim, root):
        assert result.success, failures(result)
    assert warehouse_rows(root) == fault_free


def _nightly_of(
    assets: AccountAssets, resources: Mapping[str, object]
) -> list[dg.ExecuteInProcessResult]:
    """`nightly` of one account of an accounts file: its funding for `FUNDING_DAYS` (one month),
    then its snapshots of today."""
    assert month_of(FUNDING_DAYS[0]) == month_of(FUNDING_DAYS[-1])
    days = {"first_day": FIRST, "last_day": LAST}
    funding_history = assets.tables["funding_history"]
    funding = dg.materialize(
        [funding_history],
        resources=resources,
        raise_on_error=False,
        partition_key=month_of(FUNDING_DAYS[0]),
        run_config={"ops": {funding_history.node_def.name: {"config": days}}},
    )
    snapshots = dg.materialize(list(assets.snapshots), resources=resources, raise_on_error=False)
    return [funding, snapshots]


Night = dict[str, Callable[[], list[dg.ExecuteInProcessResult]]]


def _two_accounts(sim: Simulator, root: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> Night:
    """Each account's night on the warehouse at ``root``, as the code location of the
    environment of an accounts file of `TWO_ACCOUNTS` (written under ``base``) runs it."""
    env = two_accounts_env(sim, root, base / "dagster", base / "accounts.yaml")
    found = location(Settings.from_env(env))
    assert [account.name for account in found.accounts] == list(TWO_ACCOUNTS)
    # The runs read the keys from the variables the file names, as a deployment's do.
    for account in found.accounts:
        for variable in (account.key_env, account.secret_env):
            assert variable is not None
            monkeypatch.setenv(variable, env[variable])
    resources = found.definitions.resources
    return {assets.account.name: partial(_nightly_of, assets, resources) for assets in found.built}


@dataclass(frozen=True)
class TwoAccounts:
    """The simulator of the two-account cases, and the warehouse both its accounts filled."""

    sim: Simulator
    root: Path
    clean: dict[str, Rows]


@pytest.fixture(scope="module")
def two_accounts(
    tmp_path_factory: pytest.TempPathFactory, fault_free: Rows
) -> Iterator[TwoAccounts]:
    base = tmp_path_factory.mktemp("two-accounts")
    with (
        Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim,
        pytest.MonkeyPatch.context() as monkeypatch,
    ):
        night = _two_accounts(sim, base / "warehouse", base, monkeypatch)
        for name in TWO_ACCOUNTS:
            for result in night[name]():
                assert result.success, failures(result)
                assert failures(result) == []
        clean = {name: warehouse_rows(base / "warehouse", name) for name in TWO_ACCOUNTS}
        # The main account's rows are the single account's (the same key); the sub-account's
        # its own.
        assert clean["main"] == fault_free
        assert clean["sub_1"]["funding_history"]
        assert clean["sub_1"]["funding_history"] != clean["main"]["funding_history"]
        assert clean["sub_1"]["_rejects"] == []
        yield TwoAccounts(sim, base / "warehouse", clean)


@pytest.mark.parametrize(
    "kind",
    [Fault.HTTP_500, Fault.MISSING_FIELD],
    ids=["retried-http_500", "rejected-missing_field"],
)
def test_a_faulted_account_leaves_the_other_untouched_and_reruns_fault_free(
    two_accounts: TwoAccounts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: Fault
) -> None:
    sim, clean, root = two_accounts.sim, two_accounts.clean, tmp_path / "warehouse"
    # The catalog names the root it reads: the copy's is built for the copy.
    shutil.copytree(two_accounts.root, root, ignore=shutil.ignore_patterns(CATALOG_FILE))
    night = _two_accounts(sim, root, tmp_path, monkeypatch)
    untouched = account_files(root, "sub_1")

    sim.faults.set(ONE_KIND, [kind], paths=DATA_PATHS, seed=1)
    try:
        faulted = night["main"]()
        injected = sim.faults.injected[kind]
    finally:
        sim.faults.clear()
    assert injected >= 2
    assert account_files(root, "sub_1") == untouched
    assert warehouse_rows(root, "sub_1") == clean["sub_1"]
    rows = warehouse_rows(root, "main")
    if kind in RECORD_LEVEL:
        rejected = rows.pop("_rejects")
        assert rejected, "an altered record reached a table or vanished"
        assert all(": missing" in reason for _t, _p, _i, _raw, reason, *_ in rejected), rejected
        for table, kept in rows.items():
            assert all(row in clean["main"][table] for row in kept), table
    else:  # retried: the night is whole as it is
        for result in faulted:
            assert result.success, failures(result)
            assert failures(result) == []
        assert rows == clean["main"]

    for result in night["main"]():
        assert result.success, failures(result)
    assert account_files(root, "sub_1") == untouched
    assert {name: warehouse_rows(root, name) for name in TWO_ACCOUNTS} == clean
