-- Per account, market and UTC day: the fills, the base volume (sum of amount) and the quote volume (sum of deal, in the settlement ticker on a collateral market), buys and sells apart.
SELECT
    account,
    market,
    trade_date,
    split_part(market, '_', 1) AS base_ticker,
    CASE
        WHEN regexp_matches(market, {{PERP_MARKET}}) THEN {{SETTLEMENT_TICKER}}
        ELSE split_part(market, '_', 2)
    END AS quote_ticker,
    count(*) AS fills,
    sum(amount) AS base_volume,
    sum(deal) AS quote_volume,
    count(*) FILTER (WHERE side = 'buy') AS buys,
    coalesce(sum(amount) FILTER (WHERE side = 'buy'), 0) AS buy_base_volume,
    coalesce(sum(deal) FILTER (WHERE side = 'buy'), 0) AS buy_quote_volume,
    count(*) FILTER (WHERE side = 'sell') AS sells,
    coalesce(sum(amount) FILTER (WHERE side = 'sell'), 0) AS sell_base_volume,
    coalesce(sum(deal) FILTER (WHERE side = 'sell'), 0) AS sell_quote_volume
FROM trades
GROUP BY account, market, trade_date
