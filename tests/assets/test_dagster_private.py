"""What the project takes from Dagster's private API is still there, and still what the code
expects: an upgrade that moves or changes one fails here, by name."""

from __future__ import annotations

import inspect

from assets import dagster_private


def test_the_interrupt_the_cli_raises_between_steps_is_dagsters_own() -> None:
    error = dagster_private.DagsterExecutionInterruptedError
    assert issubclass(error, BaseException)
    assert error.__module__.startswith("dagster.")
    assert not inspect.signature(dagster_private.check_captured_interrupt).parameters
    assert dagster_private.check_captured_interrupt() is False  # no signal caught here


def test_the_schedule_ticks_the_service_tests_read_have_their_fields() -> None:
    assert dagster_private.InstigatorType.SCHEDULE.value == "SCHEDULE"
    fields = set(inspect.signature(dagster_private.InstigatorTick).parameters) | {
        name for name, _ in inspect.getmembers(dagster_private.InstigatorTick)
    }
    assert {"tick_id", "timestamp", "run_ids"} <= fields


def test_no_module_but_this_one_calls_into_dagsters_private_api() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    private = [
        str(path.relative_to(root))
        for folder in ("assets", "pipeline", "warehouse", "bench", "tests")
        for path in (root / folder).rglob("*.py")
        if path.name != "dagster_private.py"
        and any(
            line.lstrip().startswith(("from dagster._", "import dagster._"))
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert private == []
