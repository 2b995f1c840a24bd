-- input
SELECT region, COUNT(*) AS n FROM s.sales WHERE amount > 10 GROUP BY region HAVING COUNT(*) > 5

-- capture
SELECT
  region,
  n,
  __ps_1
FROM (
  SELECT
    *
  FROM (
    SELECT
      region,
      COUNT(*) AS n,
      COLLECT_SET(__ps_1) AS __ps_1
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
      WHERE
        amount > 10
    ) AS q2
    GROUP BY
      region
  ) AS q3
  WHERE
    n > 5
) AS q4
-- set: __ps_1

-- use
SELECT
  region,
  n
FROM (
  SELECT
    *
  FROM (
    SELECT
      region,
      COUNT(*) AS n
    FROM (
      SELECT
        *
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
      WHERE
        amount > 10
    ) AS q4
    GROUP BY
      region
  ) AS q5
  WHERE
    n > 5
) AS q6
