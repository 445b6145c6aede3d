"""Where a warehouse's root resolves to (`Warehouse.open`): its store, its catalog and its local
files, and the roots refused (`RootError`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import RootError, Warehouse, WarehouseConfig
from warehouse.root import CATALOG_FILE


def test_a_relative_root_is_made_absolute_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for given in ("wh", Path("wh"), "file://wh", "./wh/"):
        wh = Warehouse.open(given)
        assert wh.location == str(tmp_path / "wh"), given
        assert wh.local_dir == tmp_path / "wh"
    # Resolved once, when opened: a later change of directory moves nothing.
    opened = Warehouse.open("wh")
    monkeypatch.chdir(tmp_path.parent)
    assert opened.location == str(tmp_path / "wh")
    assert opened.store.url("parquet/x") == f"{tmp_path}/wh/parquet/x"


def test_a_local_root_holds_its_catalog_unless_another_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Warehouse.open(tmp_path / "wh").catalog_path == tmp_path / "wh" / CATALOG_FILE
    monkeypatch.chdir(tmp_path)
    named = Warehouse.open(tmp_path / "wh", catalog="mine/analyst.duckdb")
    assert named.catalog_path == tmp_path / "mine" / "analyst.duckdb"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    at_home = Warehouse.open(tmp_path / "wh", catalog="~/wh.duckdb")
    assert at_home.catalog_path == tmp_path / "home" / "wh.duckdb"


def test_a_remote_roots_local_files_are_under_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = Warehouse.open("s3://bucket/some/prefix/", state_home=str(tmp_path / "state"))
    assert wh.location == "s3://bucket/some/prefix"
    assert wh.store.url("report.html") == "s3://bucket/some/prefix/report.html"
    local = tmp_path / "state" / "whitebit-etl" / "s3" / "bucket" / "some" / "prefix"
    assert wh.local_dir == local
    assert wh.catalog_path == local / CATALOG_FILE
    # Without a state directory: the user's, ~/.local/state.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = Warehouse.open("s3://bucket")
    assert (
        default.local_dir
        == tmp_path / "home" / ".local" / "state" / "whitebit-etl" / "s3" / "bucket"
    )


def test_a_warehouse_opened_again_from_its_plain_values_is_the_same(tmp_path: Path) -> None:
    """What a child process (the writer) is given: the config as JSON."""
    for root in (str(tmp_path / "wh"), "s3://bucket/prefix"):
        wh = Warehouse.open(
            root,
            catalog=str(tmp_path / "c.duckdb"),
            state_home=str(tmp_path / "state"),
            lease_seconds=5,
        )
        again = Warehouse.of(WarehouseConfig(**wh.config.as_json()))
        assert (again.location, again.local_dir, again.catalog_path, again.config) == (
            wh.location, wh.local_dir, wh.catalog_path, wh.config
        )  # fmt: skip
        assert Warehouse.open(wh.location).location == wh.location


@pytest.mark.parametrize(
    ("root", "reason"),
    [
        ("memory://bucket/wh", "memory:// is not a supported store; use a local path or s3://"),
        ("gs://bucket/wh", "gs:// is not a supported store"),
        ("s3:///prefix", "s3:// root 's3:///prefix' names no bucket"),
        ("s3://key:secret@bucket/prefix", "names a bucket only"),
    ],
)
def test_a_root_that_cannot_be_used_is_refused_saying_why(root: str, reason: str) -> None:
    with pytest.raises(RootError) as refused:
        Warehouse.open(root)
    assert reason in str(refused.value)
    assert "secret" not in str(refused.value)
