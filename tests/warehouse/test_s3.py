"""The warehouse on an S3 API (moto's server on loopback): the same partitions as on local disk,
one PUT per partition, a lease for writers, and catalogs that read the store."""

from __future__ import annotations

import io
import json
import shutil
import threading
import time
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline import spec
from tests.support.records import ACCOUNT, DAY, EXTRACTED_AT, at, funding_record
from tests.support.s3 import S3Server
from tests.warehouse.test_catalog import write_funding, write_histories, write_snapshots
from warehouse import (
    RootError,
    Warehouse,
    catalog,
    layout,
    listed_s3,
    locks,
    normalize,
    object_store,
    partitions,
    report,
    schemas,
    store,
)
from warehouse.root import CATALOG_FILE


@pytest.fixture
def s3_wh(s3_root: str, tmp_path: Path) -> Warehouse:
    """The warehouse at `s3_root`, its local files (catalog, report) under the test's
    directory."""
    return Warehouse.open(s3_root, state_home=str(tmp_path / "state"))


def lease_of(s3_root: str, name: str, **times: float) -> locks.Lease:
    """A holder of the lease the store's lock of ``name`` takes."""
    objects = object_store.ObjectStore(s3_root)
    relative = f"{store.LOCKS_DIR}/{name}.lock"
    return locks.Lease(objects, objects.key(relative), objects.url(relative), **times)


def _all_tables(wh: Warehouse) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows through the catalog's views, ordered: what an analyst sees."""
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        return {
            table: con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()  # noqa: S608
            for table in schemas.TABLES
        }


def _month_of_days(wh: Warehouse) -> None:
    records = [at(DAY + timedelta(days=n), 8 * (n % 3)) for n in range(5)]
    records.append(funding_record(fundingRate="not a number"))
    batch = normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED_AT, day=DAY)
    partitions.write_batch(wh, batch, account=ACCOUNT)


@pytest.mark.slow  # a whole warehouse written twice
def test_a_warehouse_on_s3_equals_the_same_on_local_disk(
    s3_wh: Warehouse, s3_server: S3Server, s3_root: str, tmp_path: Path
) -> None:
    local = Warehouse.open(tmp_path / "local")
    for wh in (s3_wh, local):
        _month_of_days(wh)
        write_snapshots(wh)
        write_histories(wh)
    on_s3, on_disk = _all_tables(s3_wh), _all_tables(local)
    assert on_s3 == on_disk
    assert on_s3["funding_history"]
    assert on_s3["_rejects"]
    assert on_s3["main_balances"]
    # Each partition is the same file under the same name, byte for byte (rows sorted by key,
    # same writer).
    fs = s3_server.filesystem()
    bucket_prefix = s3_root.removeprefix("s3://")
    for table in ("funding_history", "main_balances", "trades", "_rejects"):
        remote = partitions.partition_files(s3_wh.store, table)
        held = partitions.partition_files(local.store, table)
        assert remote == held
        assert remote
        assert [fs.cat_file(f"{bucket_prefix}/{p}") for p in remote] == [
            (tmp_path / "local" / p).read_bytes() for p in held
        ]
    # The report of each says the same, and the S3 one is written on this machine.
    from_s3, from_disk = report.write(s3_wh), report.write(local, out=tmp_path / "local.html")
    assert from_s3.headline == from_disk.headline
    assert from_s3.headline.rejected_records == len(on_s3["_rejects"])
    assert from_s3.headline.funding_payments == len(on_s3["funding_history"])
    assert from_s3.path == report.default_path(s3_wh)
    assert from_s3.path.is_relative_to(tmp_path / "state")  # the state directory given
    # The nightly asset's page goes to the store too, where the whole team finds it.
    published, shared = report.publish(s3_wh)
    assert shared == f"{s3_root}/{report.REPORT_FILE}"
    assert fs.cat_file(f"{bucket_prefix}/{report.REPORT_FILE}").decode() == published.html


def test_a_partition_is_one_put_to_its_final_key(
    s3_wh: Warehouse, s3_root: str, s3_server: S3Server
) -> None:
    write_funding(s3_wh, [funding_record()])
    fs = s3_server.filesystem()
    bucket = s3_root.removeprefix("s3://").split("/")[0]
    keys = fs.find(bucket)
    # The partition's object, its lease gone with the write; no temp object, nothing to move.
    assert [k for k in keys if not k.endswith("/data.parquet")] == []
    assert any("funding_history/account=default/funding_month=" in k for k in keys)


def test_a_rerun_replaces_the_days_it_covers_and_keeps_the_others(
    s3_wh: Warehouse, tmp_path: Path
) -> None:
    local = Warehouse.open(tmp_path / "local")
    for wh in (s3_wh, local):
        _month_of_days(wh)
        # The second day again, another market's payment: the first day is kept.
        day = DAY + timedelta(days=1)
        batch = normalize.normalize(
            spec.FUNDING, [at(day, 16, market="ETH_PERP")], extracted_at=EXTRACTED_AT, day=day
        )
        partitions.write_batch(wh, batch, account=ACCOUNT, replace=[day])
    assert _all_tables(s3_wh) == _all_tables(local)
    with catalog.connect(s3_wh) as con:
        per_day = con.execute(
            "SELECT funding_date, list(market ORDER BY market) FROM funding_history GROUP BY 1"
        ).fetchall()
    assert dict(per_day)[DAY] == ["BTC_PERP"]
    assert dict(per_day)[DAY + timedelta(days=1)] == ["ETH_PERP"]


def test_two_writers_of_one_table_take_turns_under_the_lease(s3_wh: Warehouse) -> None:
    held: list[str] = []
    order: list[str] = []

    def write(name: str) -> None:
        with s3_wh.store.lock("funding_history") as still_held:
            held.append(name)
            assert len(held) == 1, f"two writers at once: {held}"
            order.append(name)
            time.sleep(0.3)
            still_held()
            held.remove(name)

    threads = [threading.Thread(target=write, args=(f"w{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(order) == ["w0", "w1", "w2"]


@pytest.mark.slow  # seconds for a lease to expire, on the store's clock
def test_a_lease_left_by_a_killed_writer_expires(s3_root: str, tmp_path: Path) -> None:
    wh = Warehouse.open(s3_root, state_home=str(tmp_path / "state"), lease_seconds=2)
    # A holder that never releases nor renews: what a SIGKILL leaves.
    dead = lease_of(s3_root, "funding_history", seconds=2)
    dead.acquire()
    dead._stop.set()  # its renewal thread dies with it
    started = time.monotonic()
    with wh.store.lock("funding_history"):
        waited = time.monotonic() - started
    assert 2 <= waited < 15, waited


@pytest.mark.slow  # seconds for a lease to expire, on the store's clock
def test_a_lease_taken_over_is_lost_and_says_so(s3_root: str) -> None:
    first = lease_of(s3_root, "funding_history", seconds=1.5)
    first.acquire()
    first._stop.set()  # stalled: renews no more
    time.sleep(0.1)
    second = lease_of(s3_root, "funding_history", seconds=1.5)
    second.acquire()  # after the first's expiry
    try:
        with pytest.raises(locks.LeaseError, match="lease lost while writing"):
            first.check()
    finally:
        second.release()
        first.release()


def test_a_root_with_credentials_in_it_is_refused_without_naming_them() -> None:
    with pytest.raises(RootError) as refused:
        Warehouse.open("s3://AKIAEXAMPLE:hunter2secret@bucket/prefix")
    assert "hunter2secret" not in str(refused.value)
    assert "AKIAEXAMPLE" not in str(refused.value)


def test_catalog_over_s3_holds_no_credential_and_reads_new_files(
    s3_wh: Warehouse, s3_server: S3Server, tmp_path: Path
) -> None:
    write_funding(s3_wh, [funding_record()])
    built = catalog.refresh(s3_wh, out=tmp_path / "analyst.duckdb")
    text = built.path.read_bytes()
    assert s3_server.secret.encode() not in text
    assert s3_server.key_id.encode() not in text
    # Opened from another root: the catalog names the root its views read.
    elsewhere = Warehouse.open(tmp_path / "unrelated")
    with catalog.connect(elsewhere, path=built.path) as con:
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (1,)
        # A day written after the catalog, seen at once (listing caches off).
        write_funding(s3_wh, [at(DAY + timedelta(days=1), 8)], day=DAY + timedelta(days=1))
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (2,)


def test_catalog_command_for_an_analyst_and_sql_through_it(
    s3_wh: Warehouse, s3_root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from assets.cli import main

    write_funding(s3_wh, [funding_record()])
    out = tmp_path / "mine" / "wh.duckdb"
    # An analyst's machine: the store's credentials in the environment (s3_root), no root.
    monkeypatch.delenv("WAREHOUSE_ROOT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    wrote = CliRunner().invoke(main, ["catalog", "--root", s3_root, "--out", str(out)])
    assert wrote.exit_code == 0, wrote.output
    assert str(out) in wrote.output
    asked = CliRunner().invoke(
        main,
        [
            "sql",
            "--catalog",
            str(out),
            "--json",
            "SELECT account, funding_rate FROM funding_history",
        ],
    )
    assert asked.exit_code == 0, asked.output
    assert json.loads(asked.output) == [
        {"account": ACCOUNT, "funding_rate": funding_record()["fundingRate"]}
    ]


def test_a_moved_warehouse_says_so_then_works_again_after_catalog(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    write_funding(Warehouse.open(old), [funding_record()])
    catalog.refresh(Warehouse.open(old))
    old.rename(new)
    moved = Warehouse.open(new)
    with pytest.raises(catalog.CatalogError, match=r"not there .*whitebit-etl catalog --root"):
        catalog.connect(moved, path=new / CATALOG_FILE)
    catalog.refresh(moved, out=new / CATALOG_FILE)
    with catalog.connect(moved, path=new / CATALOG_FILE) as con:
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (1,)


def test_plain_duckdb_reads_the_catalog_with_a_registered_filesystem(
    s3_wh: Warehouse, tmp_path: Path
) -> None:
    """The README's lines for a DuckDB user without this package."""
    write_funding(s3_wh, [funding_record()])
    built = catalog.refresh(s3_wh, out=tmp_path / "plain.duckdb")
    import s3fs

    con = duckdb.connect(str(built.path), read_only=True)
    con.register_filesystem(s3fs.S3FileSystem(use_listings_cache=False))
    assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (1,)
    con.close()


def test_sql_over_a_table_whose_files_are_gone_says_how_to_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from assets.cli import main

    wh = Warehouse.open(tmp_path)
    write_funding(wh, [funding_record()])
    write_snapshots(wh)
    catalog.refresh(wh)
    shutil.rmtree(tmp_path / layout.table_dir("funding_history"))
    monkeypatch.setenv("WAREHOUSE_ROOT", str(tmp_path))
    result = CliRunner().invoke(main, ["sql", "SELECT count(*) FROM funding_history"])
    assert result.exit_code == 1
    assert "files the catalog's views read are gone" in result.output
    assert f"--out {tmp_path / CATALOG_FILE}" in result.output


@pytest.mark.slow  # seconds for a lease to expire, on the store's clock
def test_a_live_lease_is_kept_for_the_time_its_holder_declared_not_the_takers(
    s3_root: str,
) -> None:
    """Two machines set to different lease times: the holder's own time decides when its lease
    has expired, or a writer with a shorter one would take a lease still renewed."""
    holder = lease_of(s3_root, "funding_history", seconds=30)  # renewed every 10 s
    holder.acquire()
    try:
        with pytest.raises(locks.LeaseError, match="for longer than 3 s"):
            lease_of(s3_root, "funding_history", seconds=1, wait_s=3).acquire()
        holder.check()  # still the holder's
    finally:
        holder.release()


@pytest.mark.slow  # seconds for a lease to expire, on the store's clock
def test_a_lease_is_not_taken_over_before_its_holder_sees_it_lost(s3_root: str) -> None:
    """The store's times are whole seconds: a lease made late in a second looks up to a second
    older than it is. A writer that took it over on that reading would write while its holder,
    counting on its own clock, still holds it."""
    time.sleep((0.9 - time.time() % 1) % 1)  # late in a second
    first = lease_of(s3_root, "funding_history", seconds=1.5)
    first.acquire()
    first._stop.set()  # stalled: renews no more
    second = lease_of(s3_root, "funding_history", seconds=1.5)
    # At the first moment the second writer would take it over (no backoff between looks).
    while not second._take_over_expired():
        time.sleep(0.01)
    try:
        with pytest.raises(locks.LeaseError, match="lease lost while writing"):
            first.check()
    finally:
        second.release()
        first.release()


def test_a_catalog_from_before_it_named_its_root(tmp_path: Path) -> None:
    """The root's own catalog is rebuilt on first use; another file is refused, saying how."""
    wh = Warehouse.open(tmp_path)
    write_funding(wh, [funding_record()])
    old = tmp_path / CATALOG_FILE
    files = f"{tmp_path / layout.table_dir('funding_history')}/*/*/data.parquet"
    view = f"CREATE VIEW funding_history AS SELECT * FROM read_parquet('{files}')"  # noqa: S608
    with duckdb.connect(str(old)) as con:
        con.execute(view)
    with catalog.connect(wh) as con:
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (1,)
        assert con.execute("SELECT root FROM _catalog").fetchone() == (str(tmp_path),)
    elsewhere = tmp_path / "elsewhere.duckdb"
    with duckdb.connect(str(elsewhere)) as con:
        con.execute(view)
    with pytest.raises(catalog.CatalogError, match="older version: rebuild it with"):
        catalog.connect(wh, path=elsewhere)


# --- How DuckDB reaches the store (warehouse.listed_s3) ---------------------------------------


def _months(wh: Warehouse, count: int) -> None:
    for n in range(count):
        day = DAY - timedelta(days=31 * n)  # before the rows were extracted
        write_funding(wh, [at(day, 8)], day=day)


def _listed(wh: Warehouse) -> listed_s3.ListedS3FileSystem:
    """The filesystem DuckDB reads the store through, made as `ObjectStore.reach` makes it (the
    same instance: fsspec keeps one per storage options)."""
    assert isinstance(wh.store, object_store.ObjectStore)
    return listed_s3.ListedS3FileSystem(**wh.store.fs.storage_options)


def test_a_query_through_the_view_lists_the_table_once_and_asks_nothing_per_file(
    s3_wh: Warehouse, s3_requests: Counter[str]
) -> None:
    """Three month files: s3fs alone would list each partition's prefix and send ten HEADs per
    file (three per open, three opens, and the glob's own)."""
    _months(s3_wh, 3)
    catalog.refresh(s3_wh)
    with catalog.connect(s3_wh) as con:
        s3_requests.clear()
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (3,)
    assert s3_requests["list_objects_v2"] == 1
    assert s3_requests["head_object"] == 0
    assert s3_requests["get_object"] <= 3 * 2  # each file's footer and rows, at most


def test_the_store_is_globbed_as_s3fs_globs_it(s3_wh: Warehouse, s3_root: str) -> None:
    _months(s3_wh, 3)
    write_funding(s3_wh, [funding_record(fundingRate="not a number")])
    assert isinstance(s3_wh.store, object_store.ObjectStore)
    listed, plain = _listed(s3_wh), s3_wh.store.fs
    for pattern in (
        "parquet/funding_history/*/*/data.parquet",
        "parquet/_rejects/*/*/*/data.parquet",
        "parquet/*",
        "parquet/funding_history/account=*/funding_month=2024-0*",
        "parquet/**/data.parquet",
        "parquet/funding_history/*/*/nothing.parquet",
    ):
        path = f"{s3_root}/{pattern}"
        assert listed.glob(path) == plain.glob(path), pattern
        assert listed.glob(path, maxdepth=2) == plain.glob(path, maxdepth=2), pattern


def test_a_file_replaced_after_its_query_globbed_it_is_never_read_mixed(
    s3_wh: Warehouse, s3_requests: Counter[str]
) -> None:
    """Its details come from the glob, and reads are pinned to the ETag the glob saw: a read
    after the file was replaced fails; the next glob looks again and reads the new file."""
    write_funding(s3_wh, [at(DAY, 8)])
    filesystem = _listed(s3_wh)
    path = s3_wh.store.url(layout.partition_file("funding_history", (ACCOUNT, DAY)))
    (found,) = filesystem.glob(path)  # a plain path: looked up afresh, one HEAD
    old = filesystem.info(found)
    write_funding(s3_wh, [at(DAY, 8), at(DAY, 16)])
    s3_requests.clear()
    assert filesystem.info(found) == old  # from the glob: no request
    assert s3_requests["head_object"] == 0
    with pytest.raises(OSError), filesystem.open(found, "rb") as stale:  # noqa: PT011
        stale.read()
    filesystem.glob(path.rsplit("/", 2)[0] + "/*/data.parquet")
    assert filesystem.info(found)["ETag"] != old["ETag"]
    with filesystem.open(found, "rb") as fresh:
        assert pq.read_table(fresh).num_rows == 2


def test_a_refresh_reads_each_file_once(s3_wh: Warehouse, s3_requests: Counter[str]) -> None:
    """Binding a view over files reads every file's footer; the curated views over
    funding_history are bound before its view reads files, or each would read them again."""
    _months(s3_wh, 3)
    s3_requests.clear()
    refreshed = catalog.refresh(s3_wh)
    assert "funding_history" not in refreshed.empty_tables
    assert s3_requests["get_object"] == 3
    assert s3_requests["head_object"] <= len(refreshed.empty_tables)
    with catalog.connect(s3_wh) as con:
        assert con.execute("SELECT count(*) FROM daily_funding_by_market").fetchone() == (3,)


def test_which_tables_have_files_is_one_listing_and_an_empty_table_one_too(
    s3_wh: Warehouse, s3_requests: Counter[str], tmp_path: Path
) -> None:
    local = Warehouse.open(tmp_path / "local")
    for wh in (s3_wh, local):
        _months(wh, 2)
        write_snapshots(wh)
        write_histories(wh)
    s3_requests.clear()
    held = partitions.tables_with_files(s3_wh.store)
    assert s3_requests == {"list_objects_v2": 1}
    assert held == partitions.tables_with_files(local.store)
    assert held == set(schemas.TABLES) - {"_rejects"}
    s3_requests.clear()
    assert partitions.partition_files(s3_wh.store, "_rejects") == []
    assert s3_requests == {"list_objects_v2": 1}  # s3fs's find alone would HEAD and list again


def test_a_refresh_whose_file_is_replaced_under_it_builds_its_views_again(
    s3_wh: Warehouse,
    s3_root: str,
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Another account's run replaces a partition between the refresh's glob and its read (as
    the nightly runs of several accounts do, each refreshing the catalog of them all): the read
    is refused, its ETag changed, and the refresh builds its views again over the new object,
    where it would have failed the run."""
    write_snapshots(s3_wh)
    (partition,) = partitions.partition_files(s3_wh.store, "main_balances")
    bucket, _, prefix = s3_root.removeprefix("s3://").partition("/")
    key = f"{prefix}/{partition}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.url,
        aws_access_key_id=s3_server.key_id,
        aws_secret_access_key=s3_server.secret,
        region_name="us-east-1",
    )
    replaced: list[str] = []
    globbed = listed_s3.ListedS3FileSystem._glob

    async def racing(
        self: listed_s3.ListedS3FileSystem, path: str, *args: Any, **kwargs: Any
    ) -> Any:
        found = await globbed(self, path, *args, **kwargs)
        if not replaced and "/main_balances/" in path:
            # The same rows in other bytes, put by another writer: a new ETag.
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            table = pq.read_table(io.BytesIO(body))
            other = io.BytesIO()
            pq.write_table(table, other, compression="gzip")
            client.put_object(Bucket=bucket, Key=key, Body=other.getvalue())
            replaced.append(key)
        return found

    monkeypatch.setattr(listed_s3.ListedS3FileSystem, "_glob", racing)
    # An instance binds its sync methods as it is made: this test's filesystems are new ones, and
    # the next test's too.
    listed_s3.ListedS3FileSystem.clear_instance_cache()
    request.addfinalizer(listed_s3.ListedS3FileSystem.clear_instance_cache)
    catalog.refresh(s3_wh)
    assert replaced
    with catalog.connect(s3_wh) as con:
        held = con.execute("SELECT ticker, main_balance FROM main_balances ORDER BY ticker")
        assert held.fetchall() == [("BTC", Decimal(0)), ("USDT", Decimal("100.5"))]
    # What is refused is a replaced file's read, nothing else.
    assert store.replaced_while_read(duckdb.IOException("... FileExpired: [Errno 16] ..."))
    assert not store.replaced_while_read(duckdb.IOException("No files found that match"))
