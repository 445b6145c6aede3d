"""Reject reasons as Arrow columns: per record, why it cannot be used (null: it can)."""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

TEXT_NULL: Final = pa.scalar(None, pa.string())


def no_reasons(length: int) -> pa.Array:
    return pa.nulls(length, pa.string())


def reason_where(mask: pa.Array, reason: str) -> pa.Array:
    """``reason`` where ``mask`` holds (a null mask does not), else null."""
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():  # the common case: no text column to build
        return no_reasons(len(mask))
    return pc.if_else(mask, pa.scalar(reason), TEXT_NULL)


def first_reason(*reasons: pa.Array) -> pa.Array:
    """Per record, the first of ``reasons`` that is not null: checks run in the order given."""
    given = [r for r in reasons if r.null_count < len(r)] or [reasons[0]]
    return pc.coalesce(*given) if len(given) > 1 else given[0]


def join_reasons(reasons: list[pa.Array]) -> pa.Array:
    """Every failing field's reason, '; '-joined; null when the record is valid."""
    # pyarrow's binary_join_element_wise(null_handling="skip") loses trailing all-null rows.
    joined = pa.nulls(len(reasons[0]), pa.string())
    for reason in reasons:
        both = pc.binary_join_element_wise(joined, reason, "; ")
        joined = pc.if_else(
            pc.is_null(joined), reason, pc.if_else(pc.is_null(reason), joined, both)
        )
    return joined
