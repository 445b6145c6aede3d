-- Each flow of flow_placement (a movement of an account's holdings, with the snapshot that closes its interval) valued in the reference currency at the close of its UTC day: value is amount times price and fee_value fee times price, each cut toward zero at 18 places (the reference is 1 on every day); price, value and fee_value are null where no market prices the asset that day, never zero.
WITH priced AS (
    SELECT
        f.*,
        -- The reference is 1 on every day, with a candle or none.
        coalesce(p.price, CASE WHEN f.ticker = {{REFERENCE}} THEN 1 END) AS price,
        coalesce(p.path, CASE WHEN f.ticker = {{REFERENCE}} THEN f.ticker END) AS price_path
    FROM flow_placement AS f
    LEFT JOIN asset_prices AS p ON p.asset = f.ticker AND p.price_date = f.day
)
SELECT
    account,
    kind,
    source,
    record_id,
    ticker,
    moved_at,
    day,
    closing_date,
    amount,
    fee,
    price,
    price_path,
    CASE WHEN amount = 0 THEN 0 ELSE exact_product(amount, price) END AS value,
    CASE WHEN fee = 0 THEN 0 ELSE exact_product(fee, price) END AS fee_value
FROM priced
