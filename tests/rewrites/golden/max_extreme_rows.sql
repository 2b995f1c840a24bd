-- input
SELECT region, MAX(amount) AS best FROM s.sales GROUP BY region

-- capture
SELECT
  region,
  best,
  __ps_1
FROM (
  SELECT
    region,
    MAX(amount) AS best,
    COLLECT_SET(__ps_1) AS __ps_1
  FROM (
    SELECT
      region,
      amount,
      __ps_1
    FROM (
      SELECT
        *
      FROM (
        SELECT
          region,
          amount,
          __fragment AS __ps_1
        FROM s.sales
      ) AS q1
      JOIN (
        SELECT
          region AS __grp_2,
          MAX(amount) AS __ext_3
        FROM (
          SELECT
            region,
            amount,
            __fragment AS __ps_1
          FROM s.sales
        ) AS q3
        GROUP BY
          region
      ) AS q2
        ON region IS NOT DISTINCT FROM __grp_2 AND (
          amount = __ext_3 OR __ext_3 IS NULL
        )
    ) AS q4
  ) AS q5
  GROUP BY
    region
) AS q6
-- set: __ps_1

-- use
SELECT
  region,
  best
FROM (
  SELECT
    region,
    MAX(amount) AS best
  FROM (
    SELECT
      region,
      amount
    FROM (
      SELECT
        *
      FROM (
        SELECT
          region,
          amount,
          id AS __sketch_id
        FROM s.sales
      ) AS q1
      WHERE
        (
          __sketch_id >= 100 AND __sketch_id < 300
        )
    ) AS q2
  ) AS q3
  GROUP BY
    region
) AS q4
