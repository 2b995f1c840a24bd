-- input
SELECT region, SUM(amount) AS total FROM s.sales GROUP BY region ORDER BY total DESC LIMIT 3

-- capture
SELECT
  region,
  total,
  __ps_1
FROM (
  SELECT
    region,
    total,
    __ps_1
  FROM (
    SELECT
      region,
      SUM(amount) AS total,
      COLLECT_SET(__ps_1) AS __ps_1
    FROM (
      SELECT
        region,
        amount,
        __fragment AS __ps_1
      FROM s.sales
    ) AS q2
    GROUP BY
      region
  ) AS q3
) AS q1
ORDER BY
  q1.total DESC
LIMIT 3
-- set: __ps_1

-- use
SELECT
  region,
  total
FROM (
  SELECT
    region,
    total
  FROM (
    SELECT
      region,
      SUM(amount) AS total
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
        ) AS q2
        WHERE
          (
            __sketch_id >= 100 AND __sketch_id < 300
          )
      ) AS q3
    ) AS q4
    GROUP BY
      region
  ) AS q5
) AS q1
ORDER BY
  q1.total DESC
LIMIT 3
