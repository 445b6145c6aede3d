-- Per account, asset and UTC day, each kind of flow its records tell as a column, signed as it moves the holdings, and their net: deposits credited (amount - fee) and withdrawals returned (canceled) on the day they were made (when they settled is not in the history), withdrawals with their fees, spot trades net of their fees, conversions, funding, realized P&L and position fees (collateral), sub-account transfers in and out, interest (its change since the investments snapshot before).
SELECT
    account,
    ticker,
    day AS flow_date,
    {{FLOW_SUMS}}
    coalesce(sum(amount), 0) AS net
FROM flow_records
GROUP BY account, ticker, day
