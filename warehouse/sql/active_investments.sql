-- Investments active (status 1) on the latest investments snapshot, with their plan's terms.
SELECT
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
FROM investments
WHERE status = 1
  AND snapshot_date = (SELECT max(snapshot_date) FROM investments)
