"""The README and the pages of docs/ hold together: every link leads somewhere, every `make`
target they name exists, every command they show runs as shown in a plain shell after `make`
(and `make` itself with the environment activated), and every page is reachable from the
README's map."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A make command in code: after a backtick, or at the start of a line of a code block.
_MAKE = re.compile(r"(?:`|^)make ([a-z][a-z-]*)", re.MULTILINE)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    return {_slug(line.lstrip("#")) for line in lines if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # an address outside the repository
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} leads nowhere"
        if anchor:
            assert anchor in _anchors(linked), f"{page.name}: no heading for #{anchor}"


def test_every_make_target_named_exists() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.MULTILINE))
    for page in PAGES:
        named = set(_MAKE.findall(page.read_text(encoding="utf-8")))
        assert named <= targets, f"{page.name}: make {sorted(named - targets)} does not exist"


#: A fenced block of shell commands.
_SHELL_BLOCK = re.compile(r"^```(?:sh|bash)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: An inline command of uv's: uv is nowhere on a plain shell's PATH (pip puts it in ~/.local/bin).
_INLINE_UV = re.compile(r"`(?:[A-Z_]+=\S+ )*uvx? [^`]*`")
#: What `make` installs into .venv/bin only, and uv: none of them on a plain shell's PATH.
_NOT_ON_THE_PATH = {"uv", "uvx", "whitebit-etl", "dagster", "pytest", "ruff", "mypy"}


def _programs(block: str) -> list[str]:
    """The program of each command of a shell block (after its variable assignments), not of
    the lines that continue one."""
    found, continued = [], False
    for line in block.splitlines():
        words = line.split()
        if not continued and words and not line[0].isspace() and not words[0].startswith("#"):
            while words and re.match(r"[A-Z_][A-Z0-9_]*=", words[0]):
                words.pop(0)
            found += words[:1]
        continued = line.rstrip().endswith("\\")
    return found


def test_every_command_shown_runs_in_a_plain_shell_after_make() -> None:
    """Issue 45, problem 5: `whitebit-etl ...` and `uv run ...` as shown gave `command not found`
    in a shell where nothing was activated. What `make` installs is shown at its path,
    `.venv/bin/...`, and each such program is there."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        programs = [p for block in _SHELL_BLOCK.findall(text) for p in _programs(block)]
        assert [p for p in programs if p in _NOT_ON_THE_PATH] == [], page.name
        assert _INLINE_UV.findall(text) == [], page.name
        installed = {p.removeprefix(".venv/bin/") for p in programs if p.startswith(".venv/")}
        assert [p for p in installed if not (Path(sys.prefix) / "bin" / p).exists()] == []


def test_make_runs_with_the_environment_activated() -> None:
    """Issue 45, problem 5: with .venv activated, every target failed with `No module named pip`:
    the Makefile's python3 was the environment's, which has neither pip nor uv. What make runs
    first (uv, through the Python it names) runs with the environment activated."""
    venv = Path(sys.prefix)
    activated = {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
    }
    # Not a sub-make of the one running the suite, which would say the directory it enters.
    for name in ("PYTHON", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        activated.pop(name, None)
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "bootstrap"], cwd=ROOT, env=activated,
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    python = planned.stdout.split()[0]
    found = shutil.which(python, path=activated["PATH"])
    assert found is not None, planned.stdout
    uv = subprocess.run(
        [found, "-m", "uv", "--version"], env=activated, capture_output=True, text=True,
        check=False, timeout=60,
    )  # fmt: skip
    assert uv.returncode == 0, uv.stderr
    assert uv.stdout.startswith("uv ")


def test_every_page_of_docs_is_on_the_readme_map() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {Path(target.partition("#")[0]).name for target in _LINK.findall(readme)}
    assert {page.name for page in PAGES[1:]} <= linked


def test_the_readme_is_short_enough_to_read_first() -> None:
    """The README is the way in: its map, the two commands, what the product guarantees; the
    details are on the pages it links."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines"


def test_no_product_module_has_grown_unnoticed() -> None:
    """A module is split where its ideas part, which no count of lines tells: a cap near the
    length of the modules here splits one idea in two to stay under it. This bound is far above
    them, to catch a module that grew unnoticed; past it, look for where its ideas part."""
    long = {
        str(path.relative_to(ROOT)): length
        for package in ("pipeline", "assets", "warehouse")
        for path in (ROOT / package).rglob("*.py")
        if (length := len(path.read_text(encoding="utf-8").splitlines())) > 1_000
    }
    assert long == {}


def test_every_setting_is_in_the_settings_table() -> None:
    """What the settings module reads is what docs/running-nightly.md tells a user to set."""
    from assets.settings import AWS_VARIABLES, Settings

    page = (ROOT / "docs" / "running-nightly.md").read_text(encoding="utf-8")
    missing = [name for name in Settings.variables() if name not in AWS_VARIABLES]
    assert [name for name in missing if f"`{name}`" not in page] == []


def test_the_warehouse_page_lists_every_table_with_its_key_and_every_curated_view() -> None:
    """docs/warehouse.md's table of tables is the schemas', and it names each view of
    warehouse/sql (with its example, in its section)."""
    from warehouse import schemas

    page = (ROOT / "docs" / "warehouse.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([a-z_]+)` \| [^|]+ \| ([^|]+) \|$", page, re.MULTILINE))
    assert listed.pop("_rejects").startswith("(raw JSON and reason")
    assert listed == {t.name: ", ".join(t.key) for t in schemas.DATA_TABLES}
    views = sorted(path.stem for path in (ROOT / "warehouse" / "sql").glob("*.sql"))
    assert [view for view in views if f"`{view}`" not in page] == []


def test_the_warehouse_error_tree_is_every_error_of_the_warehouse() -> None:
    """Every exception a warehouse module defines is a `WarehouseError` (the command line
    catches that one class), each named in the root's tree with the module that defines it."""
    import importlib
    import inspect
    import pkgutil

    import warehouse
    from warehouse.errors import WarehouseError

    defined = {
        name: value
        for module in pkgutil.walk_packages(warehouse.__path__, "warehouse.")
        for name, value in vars(importlib.import_module(module.name)).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module.name
        and value is not WarehouseError
    }
    assert [name for name, error in defined.items() if not issubclass(error, WarehouseError)] == []
    tree = dict(re.findall(r"[├└]── (\w+) +([\w.]+)", WarehouseError.__doc__ or ""))
    assert tree == {
        name: error.__module__.removeprefix("warehouse.") for name, error in defined.items()
    }
