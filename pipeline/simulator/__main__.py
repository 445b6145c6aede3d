"""``python -m pipeline.simulator``: the same as ``whitebit-etl simulator``."""

from ._cli import simulator_command

simulator_command()
