-- Each flow of flow_placement (a movement of an account's holdings, with the snapshot that closes its interval) valued in the reference currency at the close of its UTC day: value is amount times price and fee_value fee times price, each cut toward zero at 18 places; price, value and fee_value are null where no market prices the asset that day, never zero.
SELECT
    f.account,
    f.kind,
    f.source,
    f.record_id,
    f.ticker,
    f.moved_at,
    f.day,
    f.closing_date,
    f.amount,
    f.fee,
    p.price,
    p.path AS price_path,
    CASE WHEN f.amount = 0 THEN 0 ELSE exact_product(f.amount, p.price) END AS value,
    CASE WHEN f.fee = 0 THEN 0 ELSE exact_product(f.fee, p.price) END AS fee_value
FROM flow_placement AS f
LEFT JOIN asset_prices AS p ON p.asset = f.ticker AND p.price_date = f.day
