"""Several accounts in one warehouse, extracted by the nightly schedule's runs against one
simulator over loopback: each account's tables equal the same account extracted alone, an account
with a bad key fails alone, a rerun of one account leaves the others' files byte for byte, and the
report follows the night.

The tests read one night of three accounts, every history (`night`): the main account, one with
a bad key, and a sub-account. The runs are in-process, one after another, so more accounts would
prove nothing two do not (their pools and shared budgets at once are the service's and the
benchmark's)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from assets.accounts import Account, load
from assets.definitions import Location, location
from assets.jobs import nightly_requests
from assets.report import REPORT_KEY, report_requests, run_facts
from assets.settings import Settings
from assets.steps import ACCOUNT_TAG
from pipeline.simulator import SimClock, Simulator
from tests.support.cli_runs import account_files, failures, warehouse_rows
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, display

#: A night of the simulator's data: the funding month that holds its yesterday (2026-09).
TICK = datetime.fromtimestamp(FROZEN_AT, UTC).replace(hour=0, minute=30, second=0)
#: The first day of history: the night's month, every day of it read that night. (From a start
#: more than six months back, a fresh warehouse's night leaves days at stake that the exchange
#: forgets the next day, and the horizon check says so as an error until they are backfilled.)
START = TICK.date().replace(day=1)
#: The night's accounts, by the simulator key each uses (`NAMES`).
ROLES = ("partner", "disabled", "sub_1")
#: The night and the accounts' runs alone are whole nights of every history: minutes on a loaded
#: machine, end to end at scale (``make test-fast`` leaves them out).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
#: Accounts named after the simulator key they use; ``disabled`` is refused (401) on every call.
NAMES = {"partner": "main", "disabled": "broken"}


@pytest.fixture(scope="module")
def exchange() -> Iterator[Simulator]:
    """One exchange address for every account: its budgets are shared by them all."""
    with Simulator(seed=7, clock=SimClock(FROZEN_AT), subaccounts=1) as sim:
        yield sim


def _accounts_file(
    sim: Simulator,
    path: Path,
    roles: Sequence[str],
    monkeypatch: pytest.MonkeyPatch,
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
            # Only the main account's key reads the investments, the sub-accounts and their
            # transfers.
            f"    investments: {str(role == 'partner').lower()}",
            f"    subaccounts: {str(role == 'partner').lower()}",
        ]
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("WHITEBIT_ACCOUNTS_FILE", str(path))
    monkeypatch.setenv("WHITEBIT_START_DATE", START.isoformat())
    return load(Settings.from_env())


def _location(accounts: Sequence[Account]) -> Location:
    """The code location of these accounts, with the settings of this process's environment
    (its warehouse root), its clock standing ten minutes after `TICK`, when the daemon would
    launch the night's runs."""
    return location(Settings.from_env(), accounts, clock=SimClock(TICK + timedelta(minutes=10)))


def _night(
    accounts: Sequence[Account],
    root: Path,
    instance: dg.DagsterInstance,
    only: Sequence[Account] | None = None,
) -> dict[str, list[str]]:
    """The nightly schedule's runs for `TICK` (of ``only`` these accounts), each its own run as
    the daemon would launch them ten minutes later (the location's clock stands there); the
    failures of each account's runs (a horizon's warning is none: days of a
    history the exchange forgets not archived yet, which a night leaves)."""
    found = _location(accounts)
    nightly = found.definitions.resolve_job_def("nightly")
    chosen = accounts if only is None else only
    failed: dict[str, list[str]] = {account.name: [] for account in chosen}
    built = [found.assets_of(account.name) for account in chosen]
    for request in nightly_requests(built, TICK):
        result = nightly.execute_in_process(
            instance=instance,
            asset_selection=request.asset_selection,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
        # The freshness checks look at today's partitions, not at the replayed night's.
        said = [
            text
            for text in failures(result, horizon_warnings=False)
            if "nightly_partition_fresh" not in text
        ]
        failed[request.tags["whitebit/account"]] += said
    catalog.refresh(Warehouse.open(root))
    return failed


@dataclass(frozen=True)
class Night:
    """The night of `TICK` of `ROLES`' accounts into one warehouse, on one instance."""

    accounts: tuple[Account, ...]
    root: Path
    instance: dg.DagsterInstance
    #: Each account's failures (`_night`).
    failed: dict[str, list[str]]


@pytest.fixture(scope="module")
def night(exchange: Simulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Night]:
    """One night for the module's tests to read: a test that writes works on a copy of its
    warehouse (the report's test alone adds to its instance). Its variables stay set for the
    module: runs read the keys from them."""
    tmp = tmp_path_factory.mktemp("night")
    (tmp / "dagster").mkdir()
    root = tmp / "warehouse"
    with (
        pytest.MonkeyPatch.context() as patch,
        dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance,
    ):
        patch.setenv("WAREHOUSE_ROOT", str(root))
        accounts = _accounts_file(exchange, tmp / "accounts.yaml", ROLES, patch)
        yield Night(accounts, root, instance, _night(accounts, root, instance))


def test_each_account_of_a_night_equals_the_account_extracted_alone(
    night: Night, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every history, the main account's transfers and its sub-account's, beside an account
    whose runs fail."""
    landed = [a for a in night.accounts if a.name != "broken"]
    assert {a.name: night.failed[a.name] for a in landed} == {a.name: [] for a in landed}
    together = {a.name: warehouse_rows(night.root, a.name) for a in landed}
    for account in landed:
        monkeypatch.setenv("WAREHOUSE_ROOT", str(tmp_path / account.name))
        alone = _night([account], tmp_path / account.name, instance)
        assert alone == {account.name: []}
        assert together[account.name] == warehouse_rows(tmp_path / account.name, account.name)
    # Each account has rows of its own, and none is another's copy.
    funding = [tuple(rows["funding_history"]) for rows in together.values()]
    assert all(funding)
    assert len(set(funding)) == len(landed)


def test_a_bad_key_fails_its_account_alone_and_a_rerun_leaves_the_others_untouched(
    night: Night, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = night.failed
    assert failed["main"] == failed["sub_1"] == []
    # Each of its two runs fails, saying why; the accounts after it landed all the same.
    assert len(failed["broken"]) >= 2
    assert all("401" in text or "uthenticat" in text for text in failed["broken"]), failed
    rows = {name: warehouse_rows(night.root, name) for name in ("main", "sub_1", "broken")}
    assert rows["main"]["funding_history"]
    assert rows["sub_1"]["main_balances"]
    assert not any(rows["broken"].values())

    # The rerun writes to a copy of the night's warehouse, which the other tests read.
    root = tmp_path / "warehouse"
    shutil.copytree(night.root, root)
    monkeypatch.setenv("WAREHOUSE_ROOT", str(root))
    before = {account: account_files(root, account) for account in ("main", "sub_1")}
    assert all(before.values())
    main = next(a for a in night.accounts if a.name == "main")
    assert _night(night.accounts, root, instance, only=[main]) == {"main": []}
    after = {account: account_files(root, account) for account in ("main", "sub_1")}
    assert after["sub_1"] == before["sub_1"]  # not rewritten: same bytes, same times
    assert after["main"].keys() == before["main"].keys()
    assert all(after["main"][f][1] > before["main"][f][1] for f in after["main"])
    assert {name: warehouse_rows(root, name) for name in rows} == rows


def test_the_report_follows_a_night_once_no_account_run_is_going(
    night: Night, instance: dg.DagsterInstance
) -> None:
    """The sensor asks for the report after the night's runs, not while one is still going; the
    report run writes the page of every account (one that failed shows no rows) with its headline
    as metadata equal to SQL over the catalog, and what the instance knows of each account."""
    accounts, root = night.accounts, night.root
    built = _location(accounts).built
    keys = [key for assets in built for asset in assets.assets for key in asset.keys]
    assert report_requests(instance, keys, "report") == []  # nothing landed yet (a new instance)
    instance = night.instance  # the night's: this test alone adds to it

    going = dg.DagsterRun(
        job_name="nightly",
        run_id=str(uuid.uuid4()),
        status=dg.DagsterRunStatus.STARTED,
        tags={ACCOUNT_TAG: "sub_1"},
    )
    instance.add_run(going)
    assert report_requests(instance, keys, "report") == []
    instance.delete_run(going.run_id)
    (request,) = report_requests(instance, keys, "report")

    report_job = _location(accounts).definitions.resolve_job_def("report")
    result = report_job.execute_in_process(instance=instance, tags=request.tags)
    assert result.success
    assert report_requests(instance, keys, "report") == []  # the report is newer than every table
    event = instance.get_latest_materialization_event(REPORT_KEY)
    assert event is not None
    assert event.asset_materialization is not None
    metadata = {name: value.value for name, value in event.asset_materialization.metadata.items()}
    with catalog.connect(Warehouse.open(root)) as con:
        payments, net = con.execute(
            "SELECT count(*), sum(funding_amount) FROM funding_history"
        ).fetchone() or (0, None)
    assert payments > 0
    assert metadata["funding_payments"] == payments
    assert metadata["funding_net_exact"] == display.text(net)
    assert metadata["accounts"] == "main, broken, sub_1"
    page = Path(str(metadata["path"])).read_text(encoding="utf-8")
    assert page.count('data-chart="') >= 6  # the summary's, and each landed account's
    assert 'id="account-broken"' not in page  # no section of an account without rows
    broken = page[page.index('<tr data-account="broken">') :].split("</tr>")[0]
    assert broken.count(">0<") == 2  # its rejects, its rows
    assert broken.count("none yet") == 2  # no night, no run succeeded
    # Its runs failed: the instance says which tables they were to land, and the page names them.
    failed = run_facts(instance, built).failed
    assert set(failed) == {"broken"}
    assert "funding_history" in failed["broken"]
    assert all(f"{table} (" in broken for table in failed["broken"])
    assert 'id="partial"' in page
    main = page[page.index('<tr data-account="main">') :].split("</tr>")[0]
    assert main.count("none yet") == 1  # no nightly schedule here; its runs succeeded

    # A field the spec does not name, seen by a table's latest materialization, is on the page.
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            dg.AssetKey(["main", "hedge_mode"]),
            metadata={"unknown_fields": dg.MetadataValue.json({"newField": "str"})},
        )
    )
    assert run_facts(instance, built).drift == {"main": ("hedge_mode: newField (str)",)}
