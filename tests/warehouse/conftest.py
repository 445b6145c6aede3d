"""Shared inputs for the warehouse tests: a warehouse's root under the test's directory, and the
warehouse opened there."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Warehouse


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture
def wh(root: Path) -> Warehouse:
    """The warehouse at `root` (its catalog in the root, as a local root's is)."""
    return Warehouse.open(root)
