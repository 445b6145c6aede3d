-- Investments active (status 1) on each account's latest investments snapshot, with their plan's terms.
SELECT
    account,
    snapshot_date,
    investment_id,
    created,
    payment_time,
    amount,
    plan_ticker AS ticker,
    interest_paid,
    plan_interest_ticker AS interest_ticker,
    plan_id,
    plan_percent,
    plan_duration_minutes,
    plan_interest_ratio,
    plan_status,
    plan_status_label
FROM (
    SELECT *
    FROM investments
    QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY account)
)
WHERE status = 1
