-- What each account holds of each asset at each snapshot (holdings), valued in the reference currency at the last daily close before the snapshot: the close of value_date, the UTC day before the snapshot's (a snapshot at midnight is valued at the instant it shows). price and price_path are asset_prices'; value is holdings times price, cut toward zero at 18 places; a holding of zero is worth zero; price and value are null where no market prices the asset that day (the unpriced_assets check names it), never zero.
WITH held AS (
    SELECT account, snapshot_date, snapshot_at, ticker, holdings,
        CAST(snapshot_at AT TIME ZONE 'UTC' AS DATE) - 1 AS value_date
    FROM holdings
)
SELECT
    h.account,
    h.snapshot_date,
    h.snapshot_at,
    h.value_date,
    h.ticker,
    h.holdings,
    p.price,
    p.path AS price_path,
    CASE WHEN h.holdings = 0 THEN 0 ELSE exact_product(h.holdings, p.price) END AS value
FROM held AS h
LEFT JOIN asset_prices AS p ON p.asset = h.ticker AND p.price_date = h.value_date
