"""The console of `serve` and `ui` folds each stack trace into one line, the whole output kept in
a log: fed a real Dagster process's output (a run's failed step, printed by Dagster's own console
logger, as for a run launched from the UI) and a Python traceback."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from assets.relay import Folding, relay

#: A run whose step fails, printed by Dagster's default console logger (the run's config names no
#: logger), in a process of its own, as a run worker's.
_FAILING_RUN = """
import dagster as dg

@dg.asset
def broken() -> None:
    raise ValueError("the answer was not a page")

job = dg.Definitions(assets=[broken]).resolve_implicit_global_asset_job_def()
job.execute_in_process(raise_on_error=False, instance=dg.DagsterInstance.ephemeral())
raise RuntimeError("the process ends on an error of its own")
"""


def test_a_failed_steps_stack_trace_is_one_line_on_the_console_and_whole_in_the_log(
    tmp_path: Path,
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _FAILING_RUN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    console = io.StringIO()
    log = tmp_path / "logs" / "code-server.log"
    relay(process.stdout, log, console).join(timeout=120)
    assert process.wait(timeout=10) == 1
    shown, kept = console.getvalue(), log.read_text()

    # The log holds every line, the frames of both stack traces.
    assert "Stack Trace:" in kept
    assert "Traceback (most recent call last):" in kept
    assert ", in broken" in kept  # the asset's frame
    # The console: each record and the errors' messages, each trace a note naming the log.
    assert "STEP_FAILURE" in shown
    assert "ValueError: the answer was not a page" in shown
    assert "RuntimeError: the process ends on an error of its own" in shown
    assert "Stack Trace:" not in shown
    assert "Traceback" not in shown
    assert '  File "' not in shown
    assert f"(its stack trace: {log})" in shown
    assert len(shown.splitlines()) < len(kept.splitlines())


def test_a_note_per_record_and_the_next_record_shown_whole() -> None:
    fold = Folding("its stack trace: the log")
    lines = [
        "2026-11-28 10:00:00 +0000 - dagster - ERROR - STEP_FAILURE - failed.\n",
        "\n",
        "Failure: interrupted (SIGINT)\n",
        "\n",
        "Stack Trace:\n",
        '  File "x.py", line 1, in f\n',
        "    raise Failure()\n",
        "\n",
        "The above exception was caused by the following exception:\n",
        "KeyboardInterrupt\n",
        "\n",
        "Stack Trace:\n",
        '  File "y.py", line 2, in g\n',
        "\x1b[32m2026-11-28 10:00:01 +0000\x1b[0m - dagster - INFO - RUN_CANCELED\n",
    ]
    shown = [out for line in lines if (out := fold(line)) is not None]
    assert shown == [
        lines[0],
        "\n",
        "Failure: interrupted (SIGINT)\n",
        "\n",
        "  (its stack trace: the log)\n",
        "KeyboardInterrupt\n",
        "\n",
        lines[-1],
    ]
