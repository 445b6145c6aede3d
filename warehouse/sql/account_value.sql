-- Each account's value at each snapshot in the reference currency: the sum of its holdings' values (holdings_value), the assets valued, and the assets it holds that no price values that day (unpriced_assets; their holdings are not in value).
SELECT
    account,
    snapshot_date,
    snapshot_at,
    value_date,
    coalesce(sum(value), 0) AS value,
    count(value) AS assets_valued,
    coalesce(list(ticker ORDER BY ticker) FILTER (WHERE value IS NULL), []) AS unpriced_assets
FROM holdings_value
GROUP BY account, snapshot_date, snapshot_at, value_date
