"""Helpers for the client's tests: clients pointed at a simulator, and a watch for secrets."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.support.client import (
    assert_no_secret,
)


@pytest.fixture(autouse=True)
def _no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every test of the client runs with all logging at DEBUG; no line may hold a secret."""
    caplog.set_level(logging.DEBUG)
    yield
    formatter = logging.Formatter()
    for when in ("setup", "call"):  # in teardown, caplog.records holds teardown's only
        for record in caplog.get_records(when):
            assert_no_secret(formatter.format(record))
