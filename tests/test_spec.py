"""The operations table (`pipeline/spec.py`) says what the contract (`docs/api.md`) says: the same
endpoints with their methods, who may call them, the budgets the contract gives and the bounds
of its parameter table. Both are written by hand; a change to one alone fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

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
        call = re.search(r"^`(GET|POST) (/api/v[14]/\S+)`", block, re.M)
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
        # The kline alone is v1's (4.22): v4 documents none.
        assert op.path.startswith(spec.API_PREFIX) or op is spec.KLINE, name
        if limit is not None:
            own = op.endpoint_budget or op.budget  # an endpoint's own budget is the tighter
            assert (own.requests, own.period_s) == (limit, 10.0), name


def _bound_checks(op: spec.Operation, params: list[str], bound: str) -> int:
    """Compare one row of section 8's bounds with the operation; the number of facts compared."""
    checked = 0
    rule, _, reach = bound.partition(";")
    if reach:
        (most,) = re.findall(r"`offset \+ limit` at most ([\d,]+)", reach)
        assert op.max_reach == int(most.replace(",", "")), op.name
        checked += 1
    if op.window is not None and params == [op.window.start, op.window.end]:
        days = re.match(r"at most (\d+) days", rule)
        assert days, op.name
        assert op.window.max_span_s == int(days[1]) * 86_400, op.name
        assert ("six-month floor" in rule) is (op.window.floor is not None), op.name
        return checked + 2
    # One chunk per parameter, each after the first a range: "1-500 (default 50), 0-10,000".
    for name, chunk in zip(params, re.split(r", (?=[\d,]+-)", rule), strict=False):
        param = op.param(name)
        if span := re.match(r"([\d,]+)-([\d,]+)", chunk):
            low, high = (int(n.replace(",", "")) for n in span.groups())
            assert (param.minimum, param.maximum) == (low, high), (op.name, name)
            checked += 1
        if least := re.match(r"(\d+) or more", chunk):
            assert param.minimum == int(least[1]), (op.name, name)
            checked += 1
        if default := re.search(r"default ([\d,]+)", chunk):
            assert param.default == int(default[1].replace(",", "")), (op.name, name)
            checked += 1
        if length := re.match(r"at most (\d+) characters", chunk):
            assert param.max_length == int(length[1]), (op.name, name)
            checked += 1
        elif items := re.match(r"at most (\d+)$", chunk):
            assert param.max_items == int(items[1]), (op.name, name)
            checked += 1
    return checked


def test_the_parameter_bounds_are_the_contracts() -> None:
    endpoints = _endpoints()
    rows = re.findall(r"^\| ([^|]+) \| (`[^|]+) \| ([^|]+) \|$", _section(8), re.M)
    assert rows
    checked = 0
    for operations, params, bound in rows:
        for operation in operations.split(", "):
            matching = [path for heading, (_, path, _, _) in endpoints.items()
                        if operation.strip().lower() in heading.lower()]  # fmt: skip
            assert len(matching) == 1, operation
            op = spec.BY_PATH[matching[0]]
            checked += _bound_checks(op, re.findall(r"`(\w+)`", params), bound.strip())
    # Every fact of the table was compared: none fell through the patterns above.
    facts = sum(
        len(re.findall(r"\d+-[\d,]+|\d+ or more|default \d|at most \d+|six-month", bound))
        * len(operations.split(", "))
        for operations, _, bound in rows
    )
    assert checked == facts


def test_a_history_is_declared_with_what_its_records_do_to_the_holdings() -> None:
    """``flows`` has no default: a history states its flows, or ``()``. A kind the views do not
    show, a `Flow` of a snapshot or a `Change` of records with a time is refused; every kind the
    views show is some history's."""
    declared = {f.name: getattr(spec.FUNDING, f.name) for f in dataclasses.fields(spec.History)}
    del declared["flows"], declared["columns_by_name"]
    with pytest.raises(TypeError, match="flows"):
        spec.History(**declared)
    refused = [
        (spec.FUNDING, spec.Flow("fees", "'USDT'", "-fee", "exact"), "'fees' is not in FLOW_KINDS"),
        (spec.FUNDING, spec.Change("interest", "market", "funding_amount"), "a Change is of a"),
        (spec.MAIN_BALANCES, spec.Flow("deposits", "ticker", "main_balance", "exact"), "a Flow is"),
    ]
    for history, flow, message in refused:
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(history, flows=(flow,))
    kinds = {flow.kind for history in spec.HISTORIES.values() for flow in history.flows}
    assert kinds == set(spec.FLOW_KINDS)
