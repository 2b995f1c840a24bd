-- input
SELECT id, SUM(amount) AS total FROM s.sales GROUP BY id HAVING SUM(amount) > 10

-- capture
SELECT
  id,
  total
FROM (
  SELECT
    *
  FROM (
    SELECT
      id,
      SUM(amount) AS total
    FROM (
      SELECT
        id,
        amount
      FROM s.sales
    ) AS q1
    GROUP BY
      id
  ) AS q2
  WHERE
    total > 10
) AS q3
-- delayed: __ps_1 = fragment of id

-- use
SELECT
  id,
  total
FROM (
  SELECT
    *
  FROM (
    SELECT
      id,
      SUM(amount) AS total
    FROM (
      SELECT
        id,
        amount
      FROM s.sales AS q1
      WHERE
        (
          id >= 100 AND id < 300
        )
    ) AS q2
    GROUP BY
      id
  ) AS q3
  WHERE
    total > 10
) AS q4
