"""`make bench`, the CPU section: what the six-month fills walk of a busy account (the
simulator's large scale, over 500,000 fills) costs in CPU per 1,000 fills, in the walk's own
process (fetch, parse, validate, dedupe, hand to the writer) and in the writer's (normalize,
write Parquet), against the same walk by the code before the walk's CPU was halved (`BEFORE`,
checked out into a temporary git worktree), in one run.

The machine is shared and its speed drifts, so the two run by turns (`ROUNDS` pairs, one after
the other, on one simulator warmed by a first walk) and each side's figure is its median: the
ratio is what the row says. Each walk runs in a child process of its own: this file run as a
script with one tree or the other first on ``sys.path``, so it imports nothing of `bench` (the
old tree's would shadow it), only what both trees hold alike (`assets.loading.load_monthly`,
`warehouse.writer`). The writer's CPU is what its host process reaped of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from statistics import median
from typing import Any, Final

from bench import Figure

SECTION: Final = "cpu"
#: main's commit before the walk's CPU was halved: the code the row compares with.
BEFORE: Final = "1338297"
#: Pairs of walks, before and now by turns.
ROUNDS: Final = 3
_REPO: Final = Path(__file__).resolve().parent.parent


@contextmanager
def _worktree(commit: str) -> Any:
    """``commit`` checked out into a temporary git worktree, removed after."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        git = ["git", "-C", str(_REPO), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(tree), commit], check=True)  # noqa: S603
        try:
            yield tree
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=False)  # noqa: S603


def _walk(tree: Path, url: str, key: str, secret: str, root: Path) -> dict[str, Any]:
    """The fills walk by ``tree``'s code, in a child process: its figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHITEBIT_", "DAGSTER_"))}
    env["PYTHONPATH"] = str(tree)
    done = subprocess.run(  # noqa: S603 - our interpreter, this file
        [sys.executable, __file__, url, key, secret, str(root)],
        env=env, cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the fills walk of {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run() -> list[Figure]:
    from pipeline.simulator import EPOCH, spawn

    runs: dict[str, list[dict[str, Any]]] = {"before": [], "now": []}
    with (
        _worktree(BEFORE) as before,
        tempfile.TemporaryDirectory() as scratch,
        spawn(scale="large", frozen_at=EPOCH) as sim,
    ):
        sim.control("limits", enabled=False)
        creds = (sim.url, sim.credentials.api_key, sim.credentials.api_secret)
        _walk(_REPO, *creds, Path(scratch) / "warm")  # the simulator writes its fills
        for n in range(ROUNDS):
            for side, tree in (("before", before), ("now", _REPO)):
                runs[side].append(_walk(tree, *creds, Path(scratch) / f"{side}-{n}"))

    def per_1000(side: str, what: str) -> float:
        return float(median(r[what] / r["rows"] * 1e6 for r in runs[side]))

    rows = {r["rows"] for rs in runs.values() for r in rs}
    same = f"{rows.pop():,} fills each" if len(rows) == 1 else f"ROWS DIFFER: {sorted(rows)}"
    how = (
        f"median of {ROUNDS} walks each, by turns with the code of {BEFORE} (a git worktree); "
        f"{same}; unpaced, on loopback"
    )
    walk = {side: median(r["walk_s"] for r in rs) for side, rs in runs.items()}
    return [
        Figure(SECTION, "six-month fills walk: CPU per 1,000 fills, the walk's process (fetch, "
               "parse, validate, dedupe, hand to the writer)", per_1000("now", "walk_cpu_s"),
               "ms", per_1000("before", "walk_cpu_s"), f"the same walk by {BEFORE}",
               f"lower is better; goal at most 0.5x; {how}; walk {walk['now']:.1f} s against "
               f"{walk['before']:.1f} s"),
        Figure(SECTION, "  the same, the writer's process (normalize, write Parquet)",
               per_1000("now", "writer_cpu_s"), "ms", per_1000("before", "writer_cpu_s"),
               f"the same walk by {BEFORE}", f"lower is better; {how}"),
        Figure(SECTION, "  the same, both processes", per_1000("now", "both_cpu_s"), "ms",
               per_1000("before", "both_cpu_s"), f"the same walk by {BEFORE}",
               f"lower is better; {how}"),
    ]  # fmt: skip


# --- The child: one walk, by the tree first on sys.path --------------------------------------


def _child(url: str, key: str, secret: str, root: str) -> dict[str, Any]:
    import asyncio
    import logging
    import time

    import psutil

    from assets.loading import load_monthly
    from assets.partitions import day_range
    from assets.resources import WhiteBITResource
    from pipeline import spec
    from pipeline.simulator import EPOCH
    from warehouse import Warehouse, writer
    from warehouse.monthly import MonthlyTarget

    last = datetime.fromtimestamp(EPOCH, UTC).date() - timedelta(days=1)
    first: date = spec.floor_day(last + timedelta(days=1))
    whitebit = WhiteBITResource(api_key=key, api_secret=secret, base_url=url, paced=False)
    wh = Warehouse.open(root)
    days = day_range(first, last + timedelta(days=1))
    target = MonthlyTarget(
        wh, spec.HISTORIES["trades"], account="default", days=days, extracted_at=datetime.now(UTC)
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WHITEBIT_")}
    log, today = logging.getLogger(__name__), spec.WALL_CLOCK.today()
    with whitebit.exchange(log, simulator_day=today) as exchange:

        async def walk() -> Any:
            async with exchange.client() as client:
                return await load_monthly(client, target, source=exchange.source, environ=environ)

        cpu = time.process_time()
        load = asyncio.run(walk())
        cpu = time.process_time() - cpu
    # The writer has ended and its host reaped it: the host's children's CPU is the writer's.
    host = writer._HOST
    assert host is not None
    reaped = psutil.Process(host.pid).cpu_times()
    writer_cpu = reaped.children_user + reaped.children_system
    return {
        "rows": load.written.rows,
        "walk_s": load.stats.elapsed_s,
        "walk_cpu_s": cpu,
        "writer_cpu_s": writer_cpu,
        "both_cpu_s": cpu + writer_cpu,
    }


if __name__ == "__main__":
    # Run as a script, its own folder is first on sys.path: the tree's bench, not this one.
    sys.path.remove(str(Path(__file__).resolve().parent))
    print(json.dumps(_child(*sys.argv[1:5])), flush=True)
