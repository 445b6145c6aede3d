"""The README and the pages of docs/ hold together: every link leads somewhere, every `make`
target they name exists, and every page is reachable from the README's map."""

from __future__ import annotations

import re
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
