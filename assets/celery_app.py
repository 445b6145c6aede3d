"""The Celery application of the workers: dagster-celery's (its tasks unchanged), with one change
to how a Redis broker hands out a task again.

A worker takes a task from Redis before it begins it; until it begins (a pool process of its
own to start), the task is only in the broker's set of unacknowledged tasks. A worker that loses
the broker then cannot put it back, and Redis hands it out again only after the transport's
visibility timeout: an hour by default, long after run monitoring's start timeout (180 s) has
failed the run. Here the timeout is a minute, looked at every 10 s: a task the broker kept (its
append-only file) goes to a worker again and its run starts within the start timeout, neither
failed nor retried. A task handed out twice runs once: Dagster ignores a run worker that starts
after another (run monitoring on), and a task begun is acknowledged at once, so a run of any
length is never handed out again.
"""

from __future__ import annotations

from typing import Final

from dagster_celery.app import app

#: Seconds a task taken and not begun stays with its worker before Redis hands it out again.
VISIBILITY_TIMEOUT_S: Final = 60

app.conf.broker_transport_options = {
    **app.conf.broker_transport_options,
    "visibility_timeout": VISIBILITY_TIMEOUT_S,
    # Look every 10 s, each look a scan (kombu scans every tenth by default).
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,
}

__all__ = ["VISIBILITY_TIMEOUT_S", "app"]
