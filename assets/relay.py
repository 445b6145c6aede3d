"""The console of `serve` and `ui`: what their Dagster processes print (the daemon, the webserver,
the code server and the run workers it starts), relayed line by line, each stack trace folded into
one line that says where it is kept whole.

A run worker's console logger is Dagster's own for a run launched from the UI (Dagster uses a
job's loggers only where the run's config names them), and it prints a failed step's whole stack
trace: at a Ctrl-C, one per interrupted step. The full output goes on into a log file beside the
instance; the console gets the messages.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import IO, Final

#: A line where a stack trace begins: Dagster's error text, or Python's.
_STACK_STARTS: Final = ("Stack Trace:", "Traceback (most recent call last):")
#: Lines inside one: a frame (indented), a blank, or the words between a chain's parts.
_CHAIN_WORDS: Final = ("The above exception", "During handling of the above exception")
#: A new log record: its time first (after a colour code, when there is one).
_RECORD: Final = re.compile(r"^(\x1b\[[0-9;]*m)*\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
_COLOUR: Final = re.compile(r"\x1b\[[0-9;]*m")


class Folding:
    """Lines in, the lines the console shows out: a stack trace's frames left out, a note in
    their place (once per record); the error's own message, which follows the frames, kept."""

    def __init__(self, note: str) -> None:
        self._note = f"  ({note})\n"
        self._in_stack = False
        self._noted = False

    def __call__(self, line: str) -> str | None:
        bare = _COLOUR.sub("", line).rstrip("\r\n")
        if _RECORD.match(bare):
            self._in_stack = self._noted = False
        if bare.strip() in _STACK_STARTS:
            self._in_stack = True
            if self._noted:
                return None
            self._noted = True
            return self._note
        if self._in_stack:
            if not bare.strip() or bare[0] in " \t" or bare.startswith(_CHAIN_WORDS):
                return None
            self._in_stack = False
        return line


def relay(output: IO[bytes], log: Path, console: IO[str] | None = None) -> threading.Thread:
    """Copy a process's ``output`` (its stdout, stderr joined to it) until its end: whole into
    ``log`` (appended), folded onto ``console`` (this process's stderr)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fold = Folding(f"its stack trace: {log}")

    def copy() -> None:
        shown = console or sys.stderr
        with output, log.open("ab") as kept:
            for raw in iter(output.readline, b""):
                kept.write(raw)
                kept.flush()
                line = fold(raw.decode(errors="replace"))
                if line is not None:
                    shown.write(line)
                    shown.flush()

    thread = threading.Thread(target=copy, name=f"relay {log.name}", daemon=True)
    thread.start()
    return thread
