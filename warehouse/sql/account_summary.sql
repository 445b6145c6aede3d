-- One row per account: its funding (payments, net amount, first and last day), its latest snapshot day, assets held, active investments, hedge mode, and records rejected.
WITH accounts AS (
    SELECT account FROM funding_history
    UNION SELECT account FROM main_balances
    UNION SELECT account FROM trading_balances
    UNION SELECT account FROM investments
    UNION SELECT account FROM hedge_mode
),
funding AS (
    SELECT
        account,
        count(*) AS funding_payments,
        sum(funding_amount) AS funding_amount,
        min(funding_date) AS first_funding_date,
        max(funding_date) AS last_funding_date
    FROM funding_history
    GROUP BY account
),
balances AS (
    SELECT
        account,
        max(coalesce(main_snapshot_date, trading_snapshot_date)) AS latest_snapshot_date,
        count(*) FILTER (WHERE main_balance <> 0 OR trading_available <> 0 OR trading_frozen <> 0)
            AS assets_held
    FROM latest_balances
    GROUP BY account
),
active AS (
    SELECT account, count(*) AS active_investments FROM active_investments GROUP BY account
),
hedge AS (
    SELECT account, arg_max(hedge_mode, snapshot_date) AS hedge_mode
    FROM hedge_mode
    GROUP BY account
),
rejected AS (
    SELECT account, count(*) AS rejected_records FROM _rejects GROUP BY account
)
SELECT
    accounts.account,
    coalesce(funding.funding_payments, 0) AS funding_payments,
    funding.funding_amount,
    funding.first_funding_date,
    funding.last_funding_date,
    balances.latest_snapshot_date,
    coalesce(balances.assets_held, 0) AS assets_held,
    coalesce(active.active_investments, 0) AS active_investments,
    hedge.hedge_mode,
    coalesce(rejected.rejected_records, 0) AS rejected_records
FROM accounts
LEFT JOIN funding USING (account)
LEFT JOIN balances USING (account)
LEFT JOIN active USING (account)
LEFT JOIN hedge USING (account)
LEFT JOIN rejected USING (account)
ORDER BY accounts.account
