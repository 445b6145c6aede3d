"""The Dockerfile builds the code location's image: it syncs the lock without the dev group,
serves the module `workspace.yaml` loads (on the port the chart's code server uses), runs as a
user other than root, and copies only paths that exist and that `.dockerignore` lets through.

Each check returns what it finds wrong, and is also run on a spoiled copy of its input, so that
it is seen to fail.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.values import ROOT
from tests.deploy.values import deployment as _deployment
from tests.deploy.values import load_values as _values

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PRODUCT = ("assets", "warehouse", "pipeline")

# --- (c) the Dockerfile ---------------------------------------------------------------------


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether `.dockerignore` keeps ``path`` out of the build context (its last matching
    pattern decides; ``!`` lets a path back in)."""
    ignored = False
    parts = Path(path).parts
    for pattern in patterns:
        negated, bare = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(prefix, bare) for prefix in prefixes):
            ignored = not negated
    return ignored


def dockerfile_problems(text: str, ignore: str, workspace: Mapping[str, Any]) -> list[str]:
    problems = []
    instructions = _instructions(text)
    patterns = [
        line.strip() for line in ignore.splitlines() if line.strip() and not line.startswith("#")
    ]
    syncs = [args for op, args in instructions if op == "RUN" and "uv sync" in args]
    if not syncs:
        problems.append("no `uv sync`")
    for args in syncs:
        if "--locked" not in args:
            problems.append(f"`uv sync` without --locked: {args}")
        if "--no-dev" not in args and "--no-default-groups" not in args:
            problems.append(f"`uv sync` would install the dev group: {args}")
        if re.search(r"--(all-groups|dev\b|group\s+dev|only-dev|only-group)", args):
            problems.append(f"`uv sync` asks for more groups: {args}")
    module = workspace["load_from"][0]["python_module"]["module_name"]
    commands = [json.loads(args) for op, args in instructions if op in ("CMD", "ENTRYPOINT")]
    command = [word for words in commands for word in words]
    if "-m" not in command or command[command.index("-m") + 1] != module:
        problems.append(f"the image does not serve {module}: {command}")
    users = [args.split(":")[0] for op, args in instructions if op == "USER"]
    if not users or users[-1] in ("root", "0"):
        problems.append("the image runs as root")
    copied: list[str] = []
    for op, args in instructions:
        if op != "COPY":
            continue
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        if any(w.startswith("--from") for w in shlex.split(args)):
            continue
        copied += words[:-1]
    for source in copied:
        if not (ROOT / source).exists():
            problems.append(f"COPY {source}: no such path in the repository")
        elif _ignored(source, patterns):
            problems.append(f"COPY {source}: .dockerignore leaves it out of the build context")
    order = [args for op, args in instructions if op in ("COPY", "RUN")]
    lock = next((i for i, a in enumerate(order) if "uv.lock" in a), None)
    code = next((i for i, a in enumerate(order) if a.split()[0] in PRODUCT), None)
    if lock is None or code is None or lock > code:
        problems.append("the lock is not copied (and synced) before the code")
    return problems


def _workspace() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "workspace.yaml").read_text(encoding="utf-8"))
    return loaded


def test_the_dockerfile_builds_the_code_location_image() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    ignore = DOCKERIGNORE.read_text(encoding="utf-8")
    assert dockerfile_problems(text, ignore, _workspace()) == []
    # Every package of the product is in the image, and the chart serves the same module.
    copied = {args.split()[0] for op, args in _instructions(text) if op == "COPY"}
    assert set(PRODUCT) <= copied
    module = _workspace()["load_from"][0]["python_module"]["module_name"]
    deployment = _deployment(_values())
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("-m") + 1] == module
    command = json.loads(next(a for op, a in _instructions(text) if op == "CMD"))
    assert command[command.index("-p") + 1] == str(deployment["port"])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("--no-dev", ""), "would install the dev group"),
        (
            ("uv sync --locked --no-dev\n", "uv sync --locked --no-dev --all-groups\n"),
            "more groups",
        ),
        (("assets.definitions", "assets.other"), "does not serve"),
        (("USER 10001:10001", "USER root"), "runs as root"),
        (("COPY warehouse ./warehouse", "COPY warehouses ./warehouse"), "no such path"),
    ],
)
def test_a_spoiled_dockerfile_is_refused(change: tuple[str, str], expected: str) -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert change[0] in text
    problems = dockerfile_problems(
        text.replace(*change), DOCKERIGNORE.read_text(encoding="utf-8"), _workspace()
    )
    assert any(expected in problem for problem in problems), problems


def test_a_copied_path_left_out_by_dockerignore_is_refused() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    ignore = DOCKERIGNORE.read_text(encoding="utf-8") + "\nassets\n"
    assert any("leaves it out" in p for p in dockerfile_problems(text, ignore, _workspace()))
