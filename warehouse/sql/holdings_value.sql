-- What each account holds of each asset at each snapshot (holdings), valued in the reference currency at the last daily close before the snapshot: the close of value_date, the UTC day before the snapshot's (a snapshot at midnight is valued at the instant it shows). price and price_path are asset_prices' (the reference is 1 on every day); value is holdings times price, cut toward zero at 18 places; a holding of zero is worth zero; price and value are null where no market prices the asset that day (the unpriced_assets check names it), never zero.
WITH priced AS (
    SELECT
        h.account,
        h.snapshot_date,
        h.snapshot_at,
        h.ticker,
        h.holdings,
        v.value_date,
        -- The reference is 1 on every day, with a candle or none.
        coalesce(p.price, CASE WHEN h.ticker = {{REFERENCE}} THEN 1 END) AS price,
        coalesce(p.path, CASE WHEN h.ticker = {{REFERENCE}} THEN h.ticker END) AS price_path
    FROM holdings AS h,
        LATERAL (SELECT CAST(h.snapshot_at AT TIME ZONE 'UTC' AS DATE) - 1 AS value_date) AS v
    LEFT JOIN asset_prices AS p ON p.asset = h.ticker AND p.price_date = v.value_date
)
SELECT
    account,
    snapshot_date,
    snapshot_at,
    value_date,
    ticker,
    holdings,
    price,
    price_path,
    CASE WHEN holdings = 0 THEN 0 ELSE exact_product(holdings, price) END AS value
FROM priced
