-- Each asset's price per UTC day in the reference currency (reference, the setting
-- WHITEBIT_REFERENCE_CURRENCY), from the exchange's daily candles: the close of its market
-- against the reference (path 'BTC_USDT'), else the product of the closes of its market to one
-- intermediate and of the intermediate's to the reference (path 'ETH_BTC*BTC_USDT'; of the
-- intermediates with both candles that day, the first by name); the reference itself is 1 (path
-- its ticker). Exact: the product is kept to 18 places, cut toward zero (exact_product);
-- price_exact is false where that cut dropped a digit.
-- A day without the candles a path needs has no row; an asset no market prices has none at all
-- (the unpriced_assets check names it).
WITH candles AS (
    SELECT split_part(market, '_', 1) AS stock, split_part(market, '_', 2) AS money, market,
        candle_date AS price_date, close
    FROM daily_candles
),
direct AS (
    SELECT stock AS asset, price_date, close AS price, market AS path
    FROM candles
    WHERE money = {{REFERENCE}}
),
legs AS (
    SELECT a.stock AS asset, a.price_date, a.market || '*' || b.market AS path,
        a.close AS x, b.close AS y,
        row_number() OVER (PARTITION BY a.stock, a.price_date ORDER BY a.money) AS n
    FROM candles AS a
    JOIN candles AS b ON b.stock = a.money AND b.price_date = a.price_date
    WHERE b.money = {{REFERENCE}} AND a.money <> {{REFERENCE}} AND a.stock <> {{REFERENCE}}
        AND NOT EXISTS (
            SELECT 1 FROM direct AS d WHERE d.asset = a.stock AND d.price_date = a.price_date
        )
)
SELECT asset, price_date, price::DECIMAL(38, 18) AS price, path, true AS price_exact,
    {{REFERENCE}} AS reference
FROM direct
UNION ALL
SELECT asset, price_date, exact_product(x, y), path, NOT product_cut(x, y), {{REFERENCE}}
FROM legs
WHERE n = 1
UNION ALL
SELECT DISTINCT {{REFERENCE}}, candle_date, 1::DECIMAL(38, 18), {{REFERENCE}}, true,
    {{REFERENCE}}
FROM daily_candles
