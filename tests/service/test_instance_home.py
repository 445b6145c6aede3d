"""Which instance the command line, `serve` and a worker open: SQLite by default, PostgreSQL
with its URL (a new home too), never one taken for the other, and a URL's password never in a
message or a file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from assets import instance as service
from assets.instance import instance_config
from assets.settings import Settings, SettingsError

Env = Callable[..., Settings]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """The settings of an environment of only these variables and the warehouse's root."""

    def settings(**variables: str) -> Settings:
        return Settings.from_env({"WAREHOUSE_ROOT": str(tmp_path / "warehouse"), **variables})

    return settings


def test_sqlite_by_default(env: Env, tmp_path: Path) -> None:
    home, storage = service.instance_home(env())
    assert (home, storage) == (tmp_path / "warehouse" / "dagster", "SQLite")
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == instance_config(postgres=False)
    assert "storage" not in instance_config(postgres=False)


URL = "postgresql+psycopg2://u:pw-789@db:5432/dagster"


def test_postgres_with_its_url_in_a_home_of_its_own(env: Env, tmp_path: Path) -> None:
    home, storage = service.instance_home(env(DAGSTER_POSTGRES_URL=URL))
    assert (home, storage) == (tmp_path / "warehouse" / "dagster-postgres", "PostgreSQL")
    written = (home / "dagster.yaml").read_text()
    assert yaml.safe_load(written) == instance_config(postgres=True)
    assert yaml.safe_load(written)["storage"] == {
        "postgres": {"postgres_url": {"env": service.POSTGRES_URL_ENV}}
    }
    assert "pw-789" not in written
    # That home is PostgreSQL's: without the URL it is refused, not opened as SQLite.
    with pytest.raises(service.InstanceError, match=service.POSTGRES_URL_ENV):
        service.instance_home(env(DAGSTER_HOME=str(home)))


def test_a_new_dagster_home_with_the_url_is_postgres(env: Env, tmp_path: Path) -> None:
    """``DAGSTER_POSTGRES_URL`` with a ``DAGSTER_HOME`` that has no dagster.yaml yet: the home is
    written for PostgreSQL, for the command line as for the service."""
    home, storage = service.instance_home(
        env(DAGSTER_HOME=str(tmp_path / "new"), DAGSTER_POSTGRES_URL=URL)
    )
    assert (home, storage) == (tmp_path / "new", "PostgreSQL")
    assert yaml.safe_load((home / "dagster.yaml").read_text()) == instance_config(postgres=True)


def test_a_sqlite_home_is_not_taken_for_postgres(env: Env) -> None:
    home, _ = service.instance_home(env())
    with pytest.raises(service.InstanceError, match="SQLite") as refused:
        service.instance_home(env(DAGSTER_HOME=str(home), DAGSTER_POSTGRES_URL=URL))
    assert "pw-789" not in str(refused.value)


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        ("postgresql://u:pw-789@db:5432/dagster", "a postgresql:// URL (the rest not shown"),
        ("postgres://u:pw-789@db:5432/dagster", "a postgres:// URL (the rest not shown"),
        ("pw-789", "not a URL (not shown"),
    ],
)
def test_a_url_without_the_driver_is_refused_without_its_password(
    env: Env, wrong: str, said: str
) -> None:
    """Refused as the settings are read, before any instance: libpq's forms too, which
    SQLAlchemy takes for another driver or none."""
    with pytest.raises(SettingsError) as refused:
        env(DAGSTER_POSTGRES_URL=wrong)
    assert str(refused.value).startswith(f"DAGSTER_POSTGRES_URL: {said}")
    assert "postgresql+psycopg2://user:password@host:5432/dagster" in str(refused.value)
    assert "pw-789" not in str(refused.value)


DEPLOYED = Path(__file__).resolve().parents[2] / "deploy" / "celery" / "dagster.yaml"


def test_celery_homes_launch_on_celery_as_deploy_celery_says_and_name_variables_only(
    env: Env,
) -> None:
    settings = env(DAGSTER_POSTGRES_URL=URL, CELERY_BROKER_URL="redis://:broker-pw-456@b:6379/0")
    home, storage = service.instance_home(settings, celery=True)
    written = (home / "dagster.yaml").read_text()
    assert storage == "PostgreSQL"
    assert yaml.safe_load(written) == instance_config(postgres=True, celery=True)
    assert yaml.safe_load(DEPLOYED.read_text()) == yaml.safe_load(written)
    assert yaml.safe_load(written)["run_launcher"]["config"] == {
        "broker": {"env": service.BROKER_ENV},
        "backend": {"env": service.BACKEND_ENV},
    }
    assert "pw-789" not in written
    assert "broker-pw-456" not in written


def test_the_launcher_follows_what_is_asked_in_a_home_it_wrote_and_not_in_an_operators(
    env: Env,
) -> None:
    home, _ = service.instance_home(env())
    config = home / "dagster.yaml"
    service.instance_home(env(), celery=True)
    assert yaml.safe_load(config.read_text()) == instance_config(postgres=False, celery=True)
    service.instance_home(env(), celery=False)
    assert yaml.safe_load(config.read_text()) == instance_config(postgres=False)
    # An operator's own file is theirs: refused, saying what to change.
    config.write_text(yaml.safe_dump(instance_config(postgres=False)))
    with pytest.raises(service.InstanceError, match=r"deploy/celery/dagster\.yaml"):
        service.instance_home(env(), celery=True)


def test_every_run_is_failed_past_the_nightly_runs_limit(env: Env) -> None:
    """A run whose worker's machine was lost never reports its end: the daemon fails it after the
    nightly runs' limit, whatever launched it (a backfill from the UI too)."""
    import dagster as dg

    from assets.jobs import NIGHTLY_MAX_RUNTIME_S

    for celery in (False, True):
        run_monitoring = instance_config(postgres=False, celery=celery)["run_monitoring"]
        assert run_monitoring["max_runtime_seconds"] == NIGHTLY_MAX_RUNTIME_S
    home, _ = service.instance_home(env())
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_max_runtime_seconds == NIGHTLY_MAX_RUNTIME_S


def test_a_file_an_older_version_wrote_is_brought_up_to_date_and_an_operators_is_left(
    env: Env,
) -> None:
    """An upgrade reaches the homes whitebit-etl wrote before (here: the runs' time limit, new in
    this version), the CLI's and the service's; a file of an operator's own stays theirs."""
    home, _ = service.instance_home(env())
    config = home / "dagster.yaml"
    for celery in (False, True):
        older = instance_config(postgres=False, celery=celery)
        del older["run_monitoring"]["max_runtime_seconds"]
        config.write_text(f"{service.WRITTEN_HEADER}\n{yaml.safe_dump(older)}")
        # The CLI's (whichever launcher the file has), then the service's (asked for one).
        service.instance_home(env(), celery=None if celery else False)
        assert yaml.safe_load(config.read_text()) == instance_config(postgres=False, celery=celery)
    config.write_text(yaml.safe_dump(older))
    service.instance_home(env(), celery=True)
    assert yaml.safe_load(config.read_text()) == older


def test_a_worker_without_a_broker_is_refused_at_once(env: Env) -> None:
    from rich.console import Console

    from assets.workers import WorkerError, run_worker

    with pytest.raises(WorkerError, match=service.BROKER_ENV):
        run_worker(Console(), env(), 1, "w")


def test_a_task_a_lost_broker_kept_is_handed_out_again_before_the_start_timeout() -> None:
    """The workers' Celery application (the one their command names) hands a task taken and
    not begun out again after its visibility timeout, looked at on each restore sweep: both
    within run monitoring's start timeout, with a sweep to spare, so its run starts, not failed."""
    from assets import celery_app
    from assets.workers import CELERY_APP, worker_command

    command = worker_command(2, "w")
    assert command[command.index("-A") + 1] == CELERY_APP == celery_app.__name__
    options = celery_app.app.conf.broker_transport_options
    sweep_s = options["unacked_restore_interval"] * options["unacked_restore_throttle"]
    handed_again_s = options["visibility_timeout"] + 2 * sweep_s
    start_timeout_s = instance_config(postgres=True, celery=True)["run_monitoring"][
        "start_timeout_seconds"
    ]
    assert handed_again_s < start_timeout_s, (handed_again_s, start_timeout_s)
    # The tasks are dagster-celery's own.
    assert {"execute_job", "execute_plan"} <= set(celery_app.app.tasks)


def test_the_instance_configuration_ships_inside_the_package() -> None:
    """`serve` from an installed wheel finds it: package data, not a file of the checkout."""
    from importlib import resources

    shipped = resources.files("assets").joinpath("dagster.yaml")
    assert shipped.is_file()
    assert yaml.safe_load(shipped.read_text())["concurrency"]["pools"] == {"default_limit": 1}


@pytest.mark.slow
def test_the_wheel_carries_the_instance_configuration(tmp_path: Path) -> None:
    """Built as a user would install it: `serve` needs no checkout beside the package."""
    import os
    import shutil
    import subprocess
    import zipfile

    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "make test runs under uv, which names itself in UV"
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [uv, "build", "--wheel", "--quiet", "--out-dir", str(tmp_path), str(root)],
        check=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as built:
        assert "assets/dagster.yaml" in built.namelist()
