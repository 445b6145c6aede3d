"""whitebit-etl: WhiteBIT account extraction into an exact, partitioned warehouse."""
