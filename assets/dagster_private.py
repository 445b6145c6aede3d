"""Every name this project takes from Dagster's private API, in one place.

Dagster may move these in any release; `tests/assets/test_dagster_private.py` imports each and
checks it is what the code expects, so an upgrade that moves one fails there, by name.
"""

from __future__ import annotations

# A configured class's schema check (tests/deploy checks the instances' configured classes).
from dagster._config import process_config

# Raised in the main thread to interrupt a run between steps, as Dagster's own handler does.
from dagster._core.errors import DagsterExecutionInterruptedError

# The tag a failed run's reason is in, and the reason Dagster gives a run it ended itself on a
# signal it took between steps ("interrupted unexpectedly").
from dagster._core.events import RunFailureReason

# The instance configuration's own check: its schema and its sections' conflicts.
from dagster._core.instance.config import dagster_instance_config

# An instance whose configuration is its home's with some sections replaced in memory only (the
# service's own Celery launcher, whose broker URL holds a password and is never written). Public
# replacement: none; `DagsterInstance.from_config` reads only the home's file and the environment.
from dagster._core.instance.ref import InstanceRef

# A run's "ticks" of a schedule, as the daemon records them (the service's tests read them).
from dagster._core.scheduler.instigation import InstigatorTick, InstigatorType
from dagster._core.storage.tags import RUN_FAILURE_REASON_TAG

# Where the instance finds a configured class (its module and name), as it loads it.
from dagster._serdes.config_class import ConfigurableClassData, class_from_code_pointer

# Whether Dagster's signal handler caught SIGTERM or SIGINT during the run.
from dagster._utils.interrupts import check_captured_interrupt

__all__ = [
    "RUN_FAILURE_REASON_TAG",
    "ConfigurableClassData",
    "DagsterExecutionInterruptedError",
    "InstanceRef",
    "InstigatorTick",
    "InstigatorType",
    "RunFailureReason",
    "check_captured_interrupt",
    "class_from_code_pointer",
    "dagster_instance_config",
    "process_config",
]
