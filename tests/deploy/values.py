"""The Helm values of the Kubernetes deployment, and the parts of them the checks read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"


def load_values() -> dict[str, Any]:
    loaded = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def deployment(values: Mapping[str, Any]) -> dict[str, Any]:
    deployments = values["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1, "one code location: assets.definitions"
    found: dict[str, Any] = deployments[0]
    return found


def launcher(values: Mapping[str, Any]) -> dict[str, Any]:
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    found: dict[str, Any] = values["runLauncher"]["config"]["k8sRunLauncher"]
    return found


def names(env: Any) -> set[str]:
    return {entry["name"] for entry in env or ()}
