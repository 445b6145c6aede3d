"""The real parts each test exercises, seen as it runs: a simulator over loopback HTTP, the
Dagster daemon (the service, or ``dagster dev`` behind the UI), PostgreSQL, Redis and Celery
workers, moto's S3 server, Chromium.

A test exercises a part when one is among its fixtures' values (a module's simulator, its S3
server), when one is started while it is set up or runs (`watch` wraps where each starts), or
when its module says so with ``pytest.mark.real_parts(...)`` (a process the test starts by
hand, as the UI's ``dagster dev``). Each test's report carries its parts
(``user_properties``, which pytest-xdist hands to the session's own process), and each session
ends by printing how many tests exercised each (`summary`): docs/development.md keeps those
counts, so that a change to the suite that drops one is seen.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar, Final

import pytest

SIMULATOR: Final = "the simulator over loopback HTTP"
DAEMON: Final = "Dagster's daemon"
POSTGRES: Final = "PostgreSQL"
CELERY: Final = "Redis and Celery workers"
S3: Final = "moto's S3 server"
CHROMIUM: Final = "Chromium"
PARTS: Final = (SIMULATOR, DAEMON, POSTGRES, CELERY, S3, CHROMIUM)
#: The report property that carries a test's parts.
PROPERTY: Final = "real_parts"


class _Seen:
    """The parts started since the current test began its setup."""

    now: ClassVar[set[str]] = set()


def begin() -> None:
    _Seen.now = set()


def _of_service(service: Any) -> set[str]:
    """``whitebit-etl serve``: the webserver and the daemon; with ``--workers``, Celery on
    Redis; with ``DAGSTER_POSTGRES_URL``, PostgreSQL."""
    parts = {DAEMON}
    if "--workers" in service.args:
        parts.add(CELERY)
    if service.env.get("DAGSTER_POSTGRES_URL"):
        parts.add(POSTGRES)
    return parts


def _of(value: Any, depth: int = 2) -> set[str]:
    """The parts a value is, or holds in its fields (a module's night: its service, its S3)."""
    from pipeline.simulator import Simulator, SpawnedSimulator
    from tests.support.postgres import LocalPostgres
    from tests.support.s3 import MotoS3
    from tests.support.service import Service

    if isinstance(value, Simulator | SpawnedSimulator):
        return {SIMULATOR}
    if isinstance(value, LocalPostgres):
        return {POSTGRES}
    if isinstance(value, MotoS3):
        return {S3}
    if isinstance(value, Service):
        return _of_service(value)
    if depth and dataclasses.is_dataclass(value) and not isinstance(value, type):
        return set().union(
            *(_of(getattr(value, f.name), depth - 1) for f in dataclasses.fields(value))
        )
    return set()


def watch(patch: pytest.MonkeyPatch) -> None:
    """Note each part started from now on in this process, where it starts."""
    from pipeline.simulator import Simulator, SpawnedSimulator
    from tests.support.postgres import LocalPostgres
    from tests.support.s3 import MotoS3
    from tests.support.service import Service

    for owner, name in (
        (Simulator, "start"),
        (SpawnedSimulator, "__enter__"),
        (LocalPostgres, "start"),
        (MotoS3, "__enter__"),
        (Service, "launch"),
    ):
        original = getattr(owner, name)

        def started(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            _Seen.now |= _of(self)
            return __original(self, *args, **kwargs)

        patch.setattr(owner, name, started)


def of_test(item: pytest.Item, values: Iterable[Any]) -> list[str]:
    """The parts a test exercised: its fixtures' ``values``, what was started for it, and what
    its markers say."""
    parts = set(_Seen.now)
    for value in values:
        parts |= _of(value)
    if item.get_closest_marker("browser") is not None:
        parts.add(CHROMIUM)
    for marker in item.iter_markers("real_parts"):
        parts.update(marker.args)
    unknown = parts - set(PARTS)
    assert not unknown, f"{item.nodeid}: no such real part {sorted(unknown)}"
    return [part for part in PARTS if part in parts]


class Counted:
    """Tests per part, of this session's reports (a pytest-xdist session's too)."""

    tests: ClassVar[Counter[str]] = Counter()

    @classmethod
    def take(cls, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY and isinstance(value, list):
                cls.tests.update(str(part) for part in value)


def summary() -> list[str]:
    """The session's count of tests per real part, a line each."""
    return [f"{Counted.tests[part]:5d} tests exercised {part}" for part in PARTS]
