"""The count of tests per real part sees a part a fixture holds in its fields, or is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.simulator import Simulator
from tests.support import real_parts
from tests.support.s3 import MotoS3


@dataclass
class _Night:
    exchange: Any
    store: Any


def test_a_part_is_seen_in_a_fixtures_value_and_in_its_fields() -> None:
    # Never started: what a value is decides, not whether it runs.
    sim, s3 = Simulator.__new__(Simulator), MotoS3.__new__(MotoS3)
    assert real_parts._of(sim) == {real_parts.SIMULATOR}
    assert real_parts._of(_Night(sim, s3)) == {real_parts.SIMULATOR, real_parts.S3}
    assert real_parts._of(_Night(_Night(None, s3), None)) == {real_parts.S3}
    assert real_parts._of("s3://bucket") == set()
