-- input
WITH big AS (SELECT id, amount FROM s.sales WHERE amount > 50) SELECT id, amount FROM big ORDER BY amount DESC, id LIMIT 5

-- capture
SELECT
  id,
  amount
FROM (
  SELECT
    id,
    amount
  FROM (
    SELECT
      id,
      amount
    FROM (
      SELECT
        id,
        amount
      FROM s.sales AS q2
      WHERE
        amount > 50
    ) AS q3
  ) AS q4
) AS q1
ORDER BY
  q1.amount DESC,
  q1.id
LIMIT 5
-- delayed: __ps_1 = fragment of id

-- use
SELECT
  id,
  amount
FROM (
  SELECT
    id,
    amount
  FROM (
    SELECT
      id,
      amount
    FROM (
      SELECT
        *
      FROM (
        SELECT
          id,
          amount
        FROM s.sales AS q2
        WHERE
          (
            id >= 100 AND id < 300
          )
      ) AS q3
      WHERE
        amount > 50
    ) AS q4
  ) AS q5
) AS q1
ORDER BY
  q1.amount DESC,
  q1.id
LIMIT 5
