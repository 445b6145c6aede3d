"""What the project takes from Dagster's private API is still there, and still what the code
expects: an upgrade that moves or changes one fails here, by name."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from assets import dagster_private

ROOT = Path(__file__).resolve().parents[2]
#: The project's code: the product, the benchmarks and the tests.
FOLDERS = ("assets", "pipeline", "warehouse", "bench", "tests")
#: A private name (``_x``, not ``__x__``) where a definition puts it: ``def _x``, ``class _X``,
#: ``self._x =``, ``_x: int``, ``_x = ...`` at the start of a line.
_DEFINED = re.compile(
    r"(?:\bdef |\bclass |\bself\.|\bcls\.|^[ \t]*)(_[A-Za-z0-9]\w*)\b(?=\s*(?:\(|:|=[^=]))", re.M
)
#: Calls that name an attribute by a string: ``setattr(obj, "_x", v)``,
#: ``monkeypatch.setattr(obj, "_x", v)``, ``getattr``, ``delattr``, ``hasattr``.
_BY_NAME = {"setattr", "getattr", "delattr", "hasattr"}


def test_the_interrupt_the_cli_raises_between_steps_is_dagsters_own() -> None:
    error = dagster_private.DagsterExecutionInterruptedError
    assert issubclass(error, BaseException)
    assert error.__module__.startswith("dagster.")
    assert not inspect.signature(dagster_private.check_captured_interrupt).parameters
    assert dagster_private.check_captured_interrupt() is False  # no signal caught here


def test_a_run_dagster_ended_on_a_signal_is_tagged_with_the_reason_the_cli_reads() -> None:
    """The CLI marks canceled a run Dagster failed itself on a signal taken between steps."""
    reason = dagster_private.RunFailureReason.UNEXPECTED_TERMINATION
    assert reason.value == "UNEXPECTED_TERMINATION"
    assert dagster_private.RUN_FAILURE_REASON_TAG == "dagster/failure_reason"


def test_the_schedule_ticks_the_service_tests_read_have_their_fields() -> None:
    assert dagster_private.InstigatorType.SCHEDULE.value == "SCHEDULE"
    fields = set(inspect.signature(dagster_private.InstigatorTick).parameters) | {
        name for name, _ in inspect.getmembers(dagster_private.InstigatorTick)
    }
    assert {"tick_id", "timestamp", "run_ids"} <= fields


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(paths: Iterable[Path]) -> frozenset[str]:
    return frozenset(
        name
        for path in paths
        for name in _DEFINED.findall(path.read_text(encoding="utf-8", errors="replace"))
        if _private(name)
    )


@cache
def dagsters_private_names() -> frozenset[str]:
    """The private names Dagster's packages define (dagster, dagster_shared, dagster_k8s...)."""
    import dagster

    site = Path(dagster.__file__).resolve().parents[1]
    return _defined(path for package in site.glob("dagster*") for path in package.rglob("*.py"))


def _defines(tree: ast.AST) -> Iterable[str]:
    """The names a module defines: of its functions, classes and arguments, the names it
    assigns, and the attributes it sets on ``self`` or ``cls``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            yield node.attr


@cache
def our_private_names() -> frozenset[str]:
    return frozenset(
        name
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        for name in _defines(ast.parse(path.read_text(encoding="utf-8")))
        if _private(name)
    )


def _chain(node: ast.expr) -> list[str]:
    """``a.b.c`` as ``["a", "b", "c"]`` (empty when it does not start at a name)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []


def private_uses(source: str, dagsters: frozenset[str], ours: frozenset[str]) -> list[str]:
    """Where ``source`` reaches into Dagster's private API: an import from a private module or of
    a private name, an attribute chain through a private name of the ``dagster`` module
    (``dagster._utils``, ``dg._core``), and an attribute of an object, read or written or named
    by a string (``monkeypatch.setattr(op, "_retry_policy", None)``), that is private to Dagster:
    a private name Dagster defines and the project does not."""

    def dagsters_own(name: str) -> bool:
        return _private(name) and name in dagsters and name not in ours

    tree = ast.parse(source)
    modules = {"dagster"}  # names the dagster module is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "dagster" and a.asname}
    found = []
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dagster":
            parts = (node.module or "").split(".")
            if any(_private(p) for p in parts) or any(_private(a.name) for a in node.names):
                found.append(f"{where}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found += [
                f"{where}: import {a.name}"
                for a in node.names
                if a.name.split(".")[0] == "dagster" and any(map(_private, a.name.split(".")))
            ]
        elif isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] in modules and any(map(_private, chain[1:])):
                found.append(f"{where}: {'.'.join(chain)}")
            elif dagsters_own(node.attr):
                found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            strings = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            if called in _BY_NAME:
                for text in strings:
                    dotted = text.split(".")
                    if dotted[0] == "dagster" and any(map(_private, dotted[1:])):
                        found.append(f"{where}: {called}({text!r})")
                    elif dagsters_own(text):
                        found.append(f"{where}: {called}(..., {text!r})")
    # An attribute chain through ``dagster._x`` is one use, not one per link.
    return sorted(set(found), key=lambda f: int(f.split()[1].rstrip(":")))


def test_no_module_but_this_one_calls_into_dagsters_private_api() -> None:
    dagsters, ours = dagsters_private_names(), our_private_names()
    assert "_retry_policy" in dagsters  # the scan reads Dagster's own definitions
    found = {
        str(path.relative_to(ROOT)): uses
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "dagster_private.py"
        and (uses := private_uses(path.read_text(encoding="utf-8"), dagsters, ours))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source",
    [
        "from dagster._core.errors import DagsterExecutionInterruptedError",
        "from dagster import _check",
        "import dagster._utils.interrupts",
        "import dagster\ndagster._utils.interrupts.check_captured_interrupt()",
        "import dagster as dg\nerror = dg._core.errors.DagsterError",
        "def f(asset):\n    return asset.op._retry_policy",
        "def f(asset):\n    asset.op._retry_policy = None",
        "def f(monkeypatch, asset):\n    monkeypatch.setattr(asset.op, '_retry_policy', None)",
        "def f(op):\n    setattr(op, '_retry_policy', None)",
        "def f(op):\n    return getattr(op, '_retry_policy')",
        "def f(monkeypatch):\n    monkeypatch.setattr('dagster._utils.interrupts.x', None)",
    ],
)
def test_each_way_into_dagsters_private_api_is_found(source: str) -> None:
    assert private_uses(source, dagsters_private_names(), our_private_names()), source


@pytest.mark.parametrize(
    "source",
    [
        "import dagster as dg\nasset = dg.asset(retry_policy=dg.RetryPolicy(max_retries=0))",
        "def f(op):\n    return op.retry_policy",
        # A private name of the project's own (`_rejects`, a warehouse table), and a dunder.
        "def f(monkeypatch, module):\n    monkeypatch.setattr(module, '_CONSTANT', 1)",
        "def f(op):\n    return op.__class__, op.__dict__",
    ],
)
def test_public_names_and_the_projects_own_private_names_pass(source: str) -> None:
    ours = our_private_names() | {"_CONSTANT"}
    assert private_uses(source, dagsters_private_names(), ours) == [], source
