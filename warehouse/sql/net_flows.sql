-- Per account, asset and UTC day, each kind of flow its records tell as a column, signed as it moves the holdings, and their net: deposits credited (amount - fee) and withdrawals returned (canceled) on the day they were made (when they settled is not in the history), withdrawals with their fees, spot trades net of their fees, conversions, funding, realized P&L and position fees (collateral), sub-account transfers in and out, interest (its change since the investments snapshot before).
SELECT
    account,
    ticker,
    day AS flow_date,
    coalesce(sum(amount) FILTER (WHERE kind = 'deposits'), 0) AS deposits,
    coalesce(sum(amount) FILTER (WHERE kind = 'withdrawals'), 0) AS withdrawals,
    coalesce(sum(amount) FILTER (WHERE kind = 'withdrawals_returned'), 0)
        AS withdrawals_returned,
    coalesce(sum(amount) FILTER (WHERE kind = 'spot_trades'), 0) AS spot_trades,
    coalesce(sum(amount) FILTER (WHERE kind = 'conversions'), 0) AS conversions,
    coalesce(sum(amount) FILTER (WHERE kind = 'funding'), 0) AS funding,
    coalesce(sum(amount) FILTER (WHERE kind = 'realized_pnl'), 0) AS realized_pnl,
    coalesce(sum(amount) FILTER (WHERE kind = 'position_fees'), 0) AS position_fees,
    coalesce(sum(amount) FILTER (WHERE kind = 'transfers_in'), 0) AS transfers_in,
    coalesce(sum(amount) FILTER (WHERE kind = 'transfers_out'), 0) AS transfers_out,
    coalesce(sum(amount) FILTER (WHERE kind = 'interest'), 0) AS interest,
    coalesce(sum(amount), 0) AS net
FROM flow_records
GROUP BY account, ticker, day
