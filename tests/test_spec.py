"""The operations table is complete and self-consistent."""

from pipeline import spec


def test_the_twenty_operations_each_have_one_path() -> None:
    assert len(spec.OPERATIONS) == 20
    assert len(spec.BY_PATH) == 20
    assert all(op.path.startswith(spec.API_PREFIX) for op in spec.OPERATIONS)
    assert [op.name for op in spec.OPERATIONS if not op.private] == ["ping"]


def test_investments_offset_window_is_ten_thousand() -> None:
    offset = spec.INVESTMENTS_HISTORY.param("offset")
    assert (offset.minimum, offset.maximum) == (0, 10_000)
    assert spec.INVESTMENTS_HISTORY.param("limit").maximum == 100
