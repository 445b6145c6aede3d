"""Fixtures for the Dagster layer: a real instance on disk, real resources, a real simulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    """A Dagster instance whose storage (event log included) is on disk, to be searched."""
    home = tmp_path / "dagster"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"
