"""Several accounts in one warehouse, extracted by the nightly schedule's runs against one
simulator over loopback: each account's tables equal the same account extracted alone, an account
with a bad key fails alone, and a rerun of one account leaves the others' files byte for byte."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from assets import Account, build
from assets.accounts import load
from assets.definitions import definitions
from assets.jobs import nightly_requests
from pipeline.simulator import SimClock, Simulator
from tests.support.cli_runs import account_files, failures, warehouse_rows
from tests.support.simulated import FROZEN_AT
from warehouse import catalog

#: A night of the simulator's data: the funding month that holds its yesterday (2026-09).
TICK = datetime.fromtimestamp(FROZEN_AT, UTC).replace(hour=0, minute=30, second=0)
SUBACCOUNTS = 4
#: Accounts named after the simulator key they use; ``disabled`` is refused (401) on every call.
NAMES = {"partner": "main", "disabled": "broken"}


@pytest.fixture(scope="module")
def exchange() -> Iterator[Simulator]:
    """One exchange address for every account: its budgets are shared by them all."""
    with Simulator(seed=7, clock=SimClock(FROZEN_AT), subaccounts=SUBACCOUNTS) as sim:
        yield sim


def _accounts_file(
    sim: Simulator, path: Path, roles: Sequence[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Account, ...]:
    """An accounts file of these simulator keys (``main`` for the partner key), their secrets
    in variables it names."""
    lines = ["accounts:"]
    for role in roles:
        name = NAMES.get(role, role)
        creds = sim.credentials_for(role)
        monkeypatch.setenv(f"{name.upper()}_KEY", creds.api_key)
        monkeypatch.setenv(f"{name.upper()}_SECRET", creds.api_secret)
        lines += [
            f"  - name: {name}",
            f"    base_url: {sim.url}",
            f"    api_key_env: {name.upper()}_KEY",
            f"    api_secret_env: {name.upper()}_SECRET",
            f"    mining_accounts: [{', '.join(sim.dataset_for(role).mining_accounts)}]",
            f"    investments: {str(role == 'partner').lower()}",
        ]
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("WHITEBIT_ACCOUNTS_FILE", str(path))
    return load()


def _night(
    accounts: Sequence[Account],
    root: Path,
    instance: dg.DagsterInstance,
    only: Sequence[Account] | None = None,
) -> dict[str, list[str]]:
    """The nightly schedule's runs for `TICK` (of ``only`` these accounts), each its own run as
    the daemon would launch them; the failures of each account's runs."""
    defs = definitions(accounts)
    nightly = defs.resolve_job_def("nightly")
    chosen = accounts if only is None else only
    failed: dict[str, list[str]] = {account.name: [] for account in chosen}
    for request in nightly_requests(build(chosen), TICK):
        result = nightly.execute_in_process(
            instance=instance,
            asset_selection=request.asset_selection,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
        # The freshness checks look at today's partitions, not at the replayed night's.
        said = [text for text in failures(result) if "nightly_partition_fresh" not in text]
        failed[request.tags["whitebit/account"]] += said
    catalog.refresh(root)
    return failed


@pytest.mark.parametrize(
    "roles",
    [
        ["partner", "sub_1"],
        pytest.param(
            ["partner", *(f"sub_{n}" for n in range(1, SUBACCOUNTS + 1))], marks=pytest.mark.slow
        ),
    ],
    ids=["2-accounts", "5-accounts"],
)
def test_each_account_of_a_night_equals_the_account_extracted_alone(
    exchange: Simulator,
    roles: list[str],
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WAREHOUSE_ROOT", str(tmp_path / "together"))
    accounts = _accounts_file(exchange, tmp_path / "accounts.yaml", roles, monkeypatch)
    assert _night(accounts, tmp_path / "together", instance) == {a.name: [] for a in accounts}
    together = {a.name: warehouse_rows(tmp_path / "together", a.name) for a in accounts}
    for account in accounts:
        monkeypatch.setenv("WAREHOUSE_ROOT", str(tmp_path / account.name))
        alone = _night([account], tmp_path / account.name, instance)
        assert alone == {account.name: []}
        assert together[account.name] == warehouse_rows(tmp_path / account.name, account.name)
    # Each account has rows of its own, and none is another's copy.
    funding = [tuple(rows["funding_history"]) for rows in together.values()]
    assert all(funding)
    assert len(set(funding)) == len(accounts)


def test_a_bad_key_fails_its_account_alone_and_a_rerun_leaves_the_others_untouched(
    exchange: Simulator,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "warehouse"
    monkeypatch.setenv("WAREHOUSE_ROOT", str(root))
    accounts = _accounts_file(
        exchange, tmp_path / "accounts.yaml", ["partner", "disabled", "sub_1"], monkeypatch
    )
    failed = _night(accounts, root, instance)
    assert failed["main"] == failed["sub_1"] == []
    # Each of its two runs fails, saying why; the accounts after it landed all the same.
    assert len(failed["broken"]) >= 2
    assert all("401" in text or "uthenticat" in text for text in failed["broken"]), failed
    rows = {name: warehouse_rows(root, name) for name in ("main", "sub_1", "broken")}
    assert rows["main"]["funding_history"]
    assert rows["sub_1"]["main_balances"]
    assert not any(rows["broken"].values())

    before = {account: account_files(root, account) for account in ("main", "sub_1")}
    assert all(before.values())
    main = next(a for a in accounts if a.name == "main")
    assert _night(accounts, root, instance, only=[main]) == {"main": []}
    after = {account: account_files(root, account) for account in ("main", "sub_1")}
    assert after["sub_1"] == before["sub_1"]  # not rewritten: same bytes, same times
    assert after["main"].keys() == before["main"].keys()
    assert all(after["main"][f][1] > before["main"][f][1] for f in after["main"])
    assert {name: warehouse_rows(root, name) for name in rows} == rows
