-- Per residual of the reconciliation, the records that could explain it: each record of the account that moves that asset by exactly that much either way (flow_placement: its history, day, record and the interval the statement placed it in), each deposit or withdrawal of that amount listed pending at a snapshot (pending_flows), and each rejected record (_rejects) holding a field of that value; a residual with none has one row, history null: no record of this amount, a movement no record held tells.
WITH residuals AS (
    SELECT account, ticker, opening_date, closing_date, residual FROM reconciliation
),
found AS (
    SELECT r.account, r.ticker, r.opening_date, r.closing_date, r.residual,
        f.source AS history, f.day, f.record_id, f.kind, f.amount,
        f.closing_date AS placed_in
    FROM residuals AS r
    JOIN flow_placement AS f
        ON f.account = r.account AND f.ticker = r.ticker AND abs(f.amount) = abs(r.residual)
    UNION ALL
    SELECT r.account, r.ticker, r.opening_date, r.closing_date, r.residual,
        'pending_flows', p.snapshot_date, p.transaction_id,
        CASE p.method WHEN {{DEPOSIT}} THEN 'deposits' ELSE 'withdrawals' END,
        CASE p.method WHEN {{DEPOSIT}} THEN p.amount - p.fee ELSE -(p.amount + p.fee) END, NULL
    FROM residuals AS r
    JOIN pending_flows AS p
        ON p.account = r.account AND p.ticker = r.ticker
        AND abs(r.residual) = CASE p.method WHEN {{DEPOSIT}} THEN p.amount - p.fee
            ELSE p.amount + p.fee END
    UNION ALL
    SELECT r.account, r.ticker, r.opening_date, r.closing_date, r.residual,
        '_rejects: ' || j."table", TRY_CAST(j."partition" AS DATE), NULL, NULL, abs(r.residual), NULL
    FROM residuals AS r
    JOIN _rejects AS j
        ON j.account = r.account
        AND list_contains(
            list_transform(
                regexp_extract_all(j.raw_json, '"(-?[0-9]+(?:\.[0-9]+)?)"', 1),
                lambda x: TRY_CAST(x AS DECIMAL(38, 18))
            ),
            abs(r.residual)
        )
)
SELECT DISTINCT * FROM found
UNION ALL
SELECT r.account, r.ticker, r.opening_date, r.closing_date, r.residual,
    NULL, NULL, NULL, 'no record of this amount', NULL, NULL
FROM residuals AS r
WHERE NOT EXISTS (
    SELECT 1 FROM found AS f
    WHERE f.account = r.account AND f.ticker = r.ticker AND f.closing_date = r.closing_date
)
