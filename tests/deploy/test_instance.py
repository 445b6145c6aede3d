"""The instance files the product ships are instances Dagster accepts.

`assets/dagster.yaml` (the instance of the CLI, `make ui` and `whitebit-etl serve`) and
`deploy/celery/dagster.yaml` (the same with PostgreSQL and the Celery launcher, for several
machines) pass Dagster's own check of an instance's configuration (its schema and the conflicts
between its sections), and each class they configure accepts its configuration. Spoiled copies
are refused, so that the check is seen to fail.

(The Kubernetes instance is the chart's to render from `deploy/helm/values.yaml`;
`test_chart.py` checks those values against the chart's schema.)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.values import ROOT

#: The instance every machine of the product starts from, and the one of several machines.
SHIPPED = ROOT / "assets" / "dagster.yaml"
CELERY = ROOT / "deploy" / "celery" / "dagster.yaml"


def load_instance(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def instance_problems(instance: Mapping[str, Any], home: Path) -> list[str]:
    """What Dagster refuses in the instance's configuration: its schema and the conflicts between
    its sections, then each configured class's own schema."""
    from dagster import DagsterInvalidConfigError

    from assets.dagster_private import (
        ConfigurableClassData,
        class_from_code_pointer,
        dagster_instance_config,
        process_config,
    )

    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(dict(instance)), encoding="utf-8")
    try:
        dagster_instance_config(str(home))
    except DagsterInvalidConfigError as exc:
        return [str(exc)]
    problems = []
    for section, data in instance.items():
        if isinstance(data, Mapping) and "module" in data:
            # As the instance reads it (``dagster.core`` is spelled ``dagster._core`` now).
            where = ConfigurableClassData(data["module"], data["class"], "{}")
            configured = class_from_code_pointer(where.module_name, where.class_name)
            result = process_config(configured.config_type(), data.get("config") or {})
            if not result.success:
                problems += [f"{section}: {error.message}" for error in result.errors or ()]
    return problems


@pytest.fixture
def variables(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the Celery instance reads from the environment; nothing is opened.
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", "postgresql+psycopg2://u@127.0.0.1:9/dagster")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "redis://127.0.0.1:9/1")


@pytest.mark.usefixtures("variables")
@pytest.mark.parametrize("path", [SHIPPED, CELERY], ids=["shipped", "celery"])
def test_dagster_accepts_the_instance(path: Path, tmp_path: Path) -> None:
    assert instance_problems(load_instance(path), tmp_path / "home") == []


def _clash(instance: dict[str, Any]) -> None:
    # Both the run queue's limit and the coordinator's: Dagster refuses the pair.
    instance["run_coordinator"] = {
        "module": "dagster.core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"max_concurrent_runs": 2},
    }


@pytest.mark.usefixtures("variables")
@pytest.mark.parametrize(
    ("path", "spoil", "says"),
    [
        (
            SHIPPED,
            lambda i: i["run_monitoring"].update(max_runtime_second=60),
            "max_runtime_second",
        ),
        (
            SHIPPED,
            lambda i: i["run_monitoring"].update(poll_interval_seconds="15"),
            "poll_interval_seconds",
        ),
        (SHIPPED, _clash, "max_concurrent_runs"),
        (CELERY, lambda i: i["run_launcher"]["config"].update(brokers="x"), "brokers"),
    ],
    ids=["unknown-key", "wrong-type", "clash", "launcher-config"],
)
def test_an_instance_dagster_refuses_is_refused(
    path: Path, spoil: Any, says: str, tmp_path: Path
) -> None:
    instance = copy.deepcopy(load_instance(path))
    spoil(instance)
    problems = instance_problems(instance, tmp_path / "home")
    assert any(says in problem for problem in problems), problems
