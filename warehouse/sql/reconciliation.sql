-- The account statement's residuals that are not zero: per account and asset, each interval between two snapshots whose holdings moved by other than the flows its records tell (residual = closing - opening - flows); no row: every interval reconciles (reconciliation_intervals lists those checked).
SELECT
    account,
    ticker,
    opening_date,
    closing_date,
    opening_at,
    closing_at,
    opening,
    flows,
    closing,
    residual
FROM account_statement
WHERE residual <> 0
