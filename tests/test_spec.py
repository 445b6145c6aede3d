"""The operations table (`pipeline/spec.py`) says what the contract (`docs/api.md`) says: the same
endpoints with their methods, who may call them, the budgets the contract gives and the bounds
of its parameter table. Both are written by hand; a change to one alone fails here."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline import spec

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _section(number: int) -> str:
    text = API.read_text(encoding="utf-8")
    start = text.index(f"\n## {number}. ")
    return text[start : text.index(f"\n## {number + 1}. ", start)]


def _endpoints() -> dict[str, tuple[str, str, int | None, bool]]:
    """Section 4's endpoints by heading: method, path, budget (when it gives one), public."""
    found = {}
    for block in _section(4).split("\n### ")[1:]:
        heading = block.splitlines()[0].split(" ", 1)[1]
        call = re.search(r"^`(GET|POST) (/api/v4/\S+)`", block, re.M)
        assert call, heading
        limit = re.search(r"Limit: ([\d,]+) requests per 10 s", block)
        name = heading.removesuffix(" (public)")
        found[name] = (
            call[1],
            call[2],
            int(limit[1].replace(",", "")) if limit else None,
            heading.endswith("(public)"),
        )
    return found


def test_the_contract_and_the_table_have_the_same_endpoints() -> None:
    documented = _endpoints()
    assert {(m, p) for m, p, _, _ in documented.values()} == {
        (op.method, op.path) for op in spec.OPERATIONS
    }
    for name, (_, path, limit, public) in documented.items():
        op = spec.BY_PATH[path]
        assert op.private is not public, name
        assert op.path.startswith(spec.API_PREFIX), name
        if limit is not None:
            assert (op.budget.requests, op.budget.period_s) == (limit, 10.0), name


def test_the_parameter_bounds_are_the_contracts() -> None:
    endpoints = _endpoints()
    rows = re.findall(r"^\| ([^|]+) \| `(\w+)` \| ([^|]+) \|$", _section(8), re.M)
    assert rows
    checked = 0
    for operation, name, bound in rows:
        matching = [path for heading, (_, path, _, _) in endpoints.items()
                    if operation.strip().lower() in heading.lower()]  # fmt: skip
        assert len(matching) == 1, operation
        param = spec.BY_PATH[matching[0]].param(name)
        if span := re.match(r"([\d,]+)-([\d,]+)", bound):
            low, high = (int(n.replace(",", "")) for n in span.groups())
            assert (param.minimum, param.maximum) == (low, high), (operation, name)
            checked += 1
        if default := re.search(r"default ([\d,]+)", bound):
            assert param.default == int(default[1].replace(",", "")), (operation, name)
            checked += 1
        if length := re.match(r"at most (\d+) characters", bound):
            assert param.max_length == int(length[1]), (operation, name)
            checked += 1
    # The table's bounds: investments' limit and offset (ranges, defaults), funding's defaults,
    # the watcher account's length.
    assert checked == 7
