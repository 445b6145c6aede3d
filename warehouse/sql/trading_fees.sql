-- Fees per account, UTC day, fee asset and market, maker and taker apart (role_label; null for a role the API's documentation does not list): the fills and their fees, every market, spot and collateral.
SELECT
    account,
    trade_date,
    fee_asset,
    market,
    role,
    role_label,
    count(*) AS fills,
    sum(fee) AS fees
FROM trades
GROUP BY account, trade_date, fee_asset, market, role, role_label
