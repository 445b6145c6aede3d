"""What a finished run has to say, read back from its events in the Dagster instance: each failed
step with its message (Dagster's wrappers and the stack left out), the run's own failure when no
step says why, and each check that did not pass with its description. The command line prints
it after a run; the alerts post it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

import dagster as dg

#: Lines of an error message the terminal prints (the rest, and the stack, are in `make ui`).
MESSAGE_LINES: Final = 8
#: Dagster's own wrappers around a step's error: the message worth printing is their cause's.
_WRAPPERS: Final = ("Dagster", "RetryRequested")


@dataclass(frozen=True, slots=True)
class Said:
    """What a run has to tell about one of its parts: a step that failed (``step <key>``), a
    check that failed or warns (``check <asset>.<name>``), or the run itself (``run``)."""

    what: str
    text: str
    warns: bool = False


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: str
    success: bool
    #: Each failed step with its message (or the run's own failure, when no step says why),
    #: then each check that did not pass with its description, whether or not the run failed.
    said: tuple[Said, ...]
    #: The signal the run was stopped by (canceled), if it was.
    interrupted: str = ""


def outcome(instance: dg.DagsterInstance, run_id: str, *, success: bool) -> RunOutcome:
    """What a finished run has to say, read from its events in the instance: each failed step
    with its message, and each check that did not pass with its description."""
    steps: list[Said] = []
    checks: list[Said] = []
    run_failure: str | None = None
    kinds = {
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION,
        dg.DagsterEventType.RUN_FAILURE,
    }
    for entry in instance.all_logs(run_id, of_type=kinds):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            user = data.user_failure_data
            text = (user.description if user else None) or (
                error_text(data.error) if data.error else event.message or ""
            )
            steps.append(Said(f"step {event.step_key}", _first_lines(text)))
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            check = event.asset_check_evaluation_data
            if not check.passed:
                checks.append(
                    Said(
                        f"check {check.asset_key.to_user_string()}.{check.check_name}",
                        check.description or "",
                        warns=check.severity == dg.AssetCheckSeverity.WARN,
                    )
                )
        else:
            run_failure = event.message or entry.user_message
    if not success and not steps and run_failure:
        steps.append(Said("run", _first_lines(run_failure)))
    return RunOutcome(run_id, success, (*steps, *checks))


class _Error(Protocol):
    """A step's error as the event log keeps it (Dagster's ``SerializableErrorInfo``)."""

    @property
    def message(self) -> str: ...
    @property
    def cls_name(self) -> str | None: ...
    @property
    def cause(self) -> _Error | None: ...


def error_text(error: _Error) -> str:
    """The message of the error a step raised, without Dagster's wrappers around it (nor any
    stack): ``ErrorClass: what it said``."""
    while error.cause is not None and (error.cls_name or "").startswith(_WRAPPERS):
        error = error.cause
    text, name = error.message.strip(), error.cls_name or ""
    qualified, colon, said = text.partition(": ")
    if colon and name and qualified.endswith(name):  # ``package.module.Class: ...``
        text = f"{name}: {said}"
    return text


def _first_lines(text: str) -> str:
    lines = text.strip().splitlines()
    if len(lines) <= MESSAGE_LINES:
        return "\n".join(lines)
    more = len(lines) - MESSAGE_LINES
    return "\n".join([*lines[:MESSAGE_LINES], f"... ({more} more lines: make ui)"])
