"""Simulated data that stays put: the moment the tests freeze the simulator's clock at."""

from pipeline.simulator import EPOCH

#: The data clock of reproducible tests: the simulator's epoch, where its data is fixed.
FROZEN_AT = EPOCH
