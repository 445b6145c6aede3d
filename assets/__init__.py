"""Dagster assets, partitions, checks, jobs, schedules and resources of the warehouse."""
