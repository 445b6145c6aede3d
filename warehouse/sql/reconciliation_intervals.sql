-- Every interval between two consecutive snapshots of each account that the account statement checks: the assets checked, those whose residual is not zero, and whether it reconciles.
SELECT
    account,
    opening_date,
    closing_date,
    opening_at,
    closing_at,
    count(*) AS assets_checked,
    count(*) FILTER (WHERE residual <> 0) AS assets_off,
    count(*) FILTER (WHERE residual <> 0) = 0 AS reconciled
FROM account_statement
GROUP BY account, opening_date, closing_date, opening_at, closing_at
