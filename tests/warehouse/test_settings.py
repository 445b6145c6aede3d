"""Where the warehouse root resolves to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from upath import UPath

from warehouse.settings import ROOT_ENV, warehouse_root


def test_a_relative_root_is_made_absolute_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for given in ("wh", UPath("wh"), Path("wh")):
        assert warehouse_root(given).path == str(tmp_path / "wh")


def test_the_environment_then_the_default_decide_without_a_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "env"))
    assert warehouse_root().path == str(tmp_path / "env")
    monkeypatch.delenv(ROOT_ENV)
    assert warehouse_root().path == str(tmp_path / "data")


def test_a_resolved_root_is_taken_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = warehouse_root(str(tmp_path / "wh"))
    assert warehouse_root(resolved) is resolved
    remote = UPath("memory://bucket/wh")
    assert warehouse_root(remote) is remote
    # A relative UPath still resolves against the working directory of the moment.
    monkeypatch.chdir(tmp_path)
    assert os.path.isabs(warehouse_root(UPath("rel")).path)
