"""Which instance `serve` opens: SQLite by default, PostgreSQL (deploy/dagster.yaml) with its URL,
never one taken for the other, and a URL's password never in a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from assets import service
from assets.runs import INSTANCE_CONFIG


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("WAREHOUSE_ROOT", str(tmp_path / "warehouse"))
    # Set, then unset: the variables the code under test sets are restored afterwards too.
    for name in ("DAGSTER_HOME", service.POSTGRES_URL_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    return monkeypatch


def test_sqlite_by_default(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home, storage = service.instance_home()
    assert (home, storage) == (tmp_path / "warehouse" / "dagster", "SQLite")
    assert (home / "dagster.yaml").read_text() == INSTANCE_CONFIG


def test_postgres_with_its_url_in_a_home_of_its_own(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env.setenv(service.POSTGRES_URL_ENV, "postgresql+psycopg2://u:pw-789@db:5432/dagster")
    home, storage = service.instance_home()
    assert (home, storage) == (tmp_path / "warehouse" / "dagster-postgres", "PostgreSQL")
    written = (home / "dagster.yaml").read_text()
    assert written == service.PRODUCTION_CONFIG.read_text()
    assert "pw-789" not in written
    # That home is PostgreSQL's: without the URL it is refused, not opened as SQLite.
    env.setenv("DAGSTER_HOME", str(home))
    env.delenv(service.POSTGRES_URL_ENV)
    with pytest.raises(service.ServiceError, match=service.POSTGRES_URL_ENV):
        service.instance_home()


def test_a_sqlite_home_is_not_taken_for_postgres(env: pytest.MonkeyPatch) -> None:
    home, _ = service.instance_home()
    env.setenv("DAGSTER_HOME", str(home))
    env.setenv(service.POSTGRES_URL_ENV, "postgresql+psycopg2://u:pw-789@db:5432/dagster")
    with pytest.raises(service.ServiceError, match="SQLite") as refused:
        service.instance_home()
    assert "pw-789" not in str(refused.value)


def test_a_url_without_the_driver_is_refused_without_its_password(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv(service.POSTGRES_URL_ENV, "postgresql://u:pw-789@db:5432/dagster")
    with pytest.raises(service.ServiceError, match=r"postgresql\+psycopg2://") as refused:
        service.instance_home()
    assert "pw-789" not in str(refused.value)
