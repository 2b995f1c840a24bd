"""Report queries printed the way SQL generators and BI tools print them.

Hand-written report texts (``tpch_queries``) name base tables in a comma list and compare dates
with date literals. Generated texts look different, and the front end must take them the same
way Spark does. :func:`generator_style` reprints a query in that style:

- every base table is read through a derived table of the columns the query uses, with the
  filters on that table alone pushed into it: ``(SELECT c_custkey, c_name FROM tpch.customer
  WHERE c_mktsegment = 'BUILDING') AS customer``, aliased by the base table's own name;
- a table read twice (``nation n1, nation n2``) gets its columns renamed per alias
  (``n_name AS n1_n_name``), as generators print self-joins;
- comma joins become ``JOIN ... ON`` with the join predicates, every predicate in parentheses;
- ``SUM`` and ``AVG`` in the select list are wrapped in ``CAST(... AS DOUBLE)``;
- date literals become ``TO_DATE('1995-03-15', 'yyyy-M-d')`` or, where compared with a column,
  plain strings (Spark casts them to dates);
- ``YEAR(x)`` becomes ``EXTRACT(YEAR FROM x)``;
- with ``quoted``, identifiers are back-quoted, as BI tools print them.

The rewrite keeps the query's meaning: Spark returns the same rows for both texts (checked by
the oracle suites).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify

from sketch_core.algebra.dialect import SPARK

# TPC-H's columns per table, in the specification's order.
TPCH_COLUMNS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey", "r_name", "r_comment"),
    "nation": ("n_nationkey", "n_name", "n_regionkey", "n_comment"),
    "supplier": ("s_suppkey", "s_name", "s_address", "s_nationkey", "s_phone", "s_acctbal", "s_comment"),
    "customer": (
        "c_custkey",
        "c_name",
        "c_address",
        "c_nationkey",
        "c_phone",
        "c_acctbal",
        "c_mktsegment",
        "c_comment",
    ),
    "part": (
        "p_partkey",
        "p_name",
        "p_mfgr",
        "p_brand",
        "p_type",
        "p_size",
        "p_container",
        "p_retailprice",
        "p_comment",
    ),
    "partsupp": ("ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost", "ps_comment"),
    "orders": (
        "o_orderkey",
        "o_custkey",
        "o_orderstatus",
        "o_totalprice",
        "o_orderdate",
        "o_orderpriority",
        "o_clerk",
        "o_shippriority",
        "o_comment",
    ),
    "lineitem": (
        "l_orderkey",
        "l_partkey",
        "l_suppkey",
        "l_linenumber",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_tax",
        "l_returnflag",
        "l_linestatus",
        "l_shipdate",
        "l_commitdate",
        "l_receiptdate",
        "l_shipinstruct",
        "l_shipmode",
        "l_comment",
    ),
}


def tpch_schemas(namespace: str = "tpch") -> dict[str, tuple[str, ...]]:
    return {f"{namespace}.{table}": columns for table, columns in TPCH_COLUMNS.items()}


def generator_style(
    sql: str, schemas: Mapping[str, Sequence[str]], *, quoted: bool = False, catalog: str | None = None
) -> str:
    """``sql`` reprinted as a SQL generator prints it (see the module docstring); ``schemas``
    maps each ``ns.table`` to its columns; ``catalog``: every table qualified with it
    (``lake.ns.table``), as tools connected to a Spark catalog print them."""
    nested: dict[str, object] = {}
    for name, columns in schemas.items():
        ns, table = name.split(".", 1)
        tables = nested.setdefault(ns, {})
        assert isinstance(tables, dict)
        tables[table] = dict.fromkeys(columns, "string")
    tree = qualify(
        sqlglot.parse_one(sql, read="spark"),
        schema=nested,
        dialect=SPARK,
        quote_identifiers=False,
        identify=False,
    )
    for exists in tree.find_all(exp.Exists):
        inner = exists.this.this if isinstance(exists.this, exp.Subquery) else exists.this
        if isinstance(inner, exp.Select):  # generators print EXISTS (SELECT 1 ...)
            inner.set("expressions", [exp.Literal.number(1)])
    aliases_per_table: dict[str, set[str]] = {}
    for source in tree.find_all(exp.Table):
        if source.args.get("db"):
            aliases_per_table.setdefault(_table_name(source), set()).add(source.alias_or_name)
    renamed = {name for name, aliases in aliases_per_table.items() if len(aliases) > 1}
    used: dict[str, set[str]] = {}
    for col in tree.find_all(exp.Column):
        if col.table:
            used.setdefault(col.table, set()).add(col.name)
    literals = itertools.count()
    # Innermost first: rewriting an outer WHERE copies the subqueries inside it.
    for select in reversed(list(tree.find_all(exp.Select))):
        _rewrite_select(select, schemas, used, renamed)
    tree = tree.transform(lambda node: _rewrite_expression(node, literals))
    if catalog is not None:
        for source in tree.find_all(exp.Table):
            if source.args.get("db"):
                source.set("catalog", exp.to_identifier(catalog))
    return tree.sql(dialect=SPARK, pretty=True, identify=quoted)


def _table_name(table: exp.Table) -> str:
    return f"{table.db}.{table.name}".lower()


def _rewrite_select(
    select: exp.Select,
    schemas: Mapping[str, Sequence[str]],
    used: Mapping[str, set[str]],
    renamed: set[str],
) -> None:
    from_ = select.args.get("from_")
    if from_ is None:
        return
    joins: list[exp.Join] = list(select.args.get("joins") or [])
    inner_only = all(not j.side and (j.kind or "").upper() in ("", "INNER", "CROSS") for j in joins)
    where = select.args.get("where")
    remaining = _conjuncts(where.this) if where is not None else []
    sources = [from_.this, *(j.this for j in joins)]
    for source in sources:
        if not (isinstance(source, exp.Table) and source.args.get("db")):
            continue
        alias = source.alias_or_name
        table = _table_name(source)
        pushed: list[exp.Expr] = []
        if inner_only:
            pushed = [c for c in remaining if _only_alias(c, alias)]
            remaining = [c for c in remaining if not any(c is p for p in pushed)]
        columns = [c for c in schemas[table] if c in used.get(alias, set())] or list(schemas[table][:1])
        prefix = f"{alias}_" if table in renamed else ""
        if prefix:
            for col in select.find_all(exp.Column):
                if col.table == alias:
                    col.set("this", exp.to_identifier(prefix + col.name))
        inner = exp.select(
            *(exp.alias_(exp.column(c), prefix + c) if prefix else exp.column(c) for c in columns)
        ).from_(exp.table_(source.name, db=source.db))
        for condition in pushed:
            stripped = condition.copy()
            for col in stripped.find_all(exp.Column):
                col.set("table", None)
                if prefix and col.name.startswith(prefix):
                    col.set("this", exp.to_identifier(col.name[len(prefix) :]))
            inner = inner.where(exp.paren(stripped), copy=False)
        source.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    if inner_only and joins:
        seen = {from_.this.alias_or_name}
        for join in joins:
            seen.add(join.this.alias_or_name)
            on = [c for c in remaining if _aliases(c) <= seen and _aliases(c) and not _has_subquery(c)]
            if not on:
                continue
            remaining = [c for c in remaining if not any(c is o for o in on)]
            join.set("kind", None)
            join.set("side", None)
            join.set("on", exp.and_(*(exp.paren(c) for c in on)))
    if where is not None:
        if remaining:
            select.set("where", exp.Where(this=exp.and_(*(exp.paren(c) for c in remaining))))
        else:
            select.set("where", None)
    for i, item in enumerate(select.expressions):
        value = item.this if isinstance(item, exp.Alias) else item
        if isinstance(value, exp.Sum | exp.Avg):
            cast = exp.cast(value.copy(), exp.DataType.build("double"))
            select.expressions[i] = exp.alias_(cast, item.alias_or_name)


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        inner = condition.this
        return _conjuncts(inner) if isinstance(inner, exp.And) else [condition]
    return [condition]


def _aliases(condition: exp.Expr) -> set[str]:
    return {c.table for c in condition.find_all(exp.Column)}


def _has_subquery(condition: exp.Expr) -> bool:
    return any(isinstance(n, exp.Query | exp.Subquery | exp.Exists) for n in condition.walk())


def _only_alias(condition: exp.Expr, alias: str) -> bool:
    return _aliases(condition) == {alias} and not _has_subquery(condition)


def _rewrite_expression(node: exp.Expr, literals: itertools.count[int]) -> exp.Expr:
    if isinstance(node, exp.Year):
        inner = node.this
        if isinstance(inner, exp.TsOrDsToDate) and not inner.args.get("format"):
            inner = inner.this
        return exp.Extract(this=exp.var("YEAR"), expression=inner)
    if (
        isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.DATE
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
    ):
        text = node.this.this
        compared = isinstance(node.parent, exp.EQ | exp.NEQ | exp.LT | exp.LTE | exp.GT | exp.GTE)
        if compared and next(literals) % 2 == 0:
            return exp.Literal.string(text)
        return exp.func("TO_DATE", exp.Literal.string(text), exp.Literal.string("yyyy-M-d"), dialect=SPARK)
    return node


# Report queries over the retail tables (``synthetic.sales_tables``) and the IMP synthetic table
# (``synthetic.synthetic_table`` as ``syn``), written as generators and BI tools print them;
# ``{ns}`` is the namespace. Each is a top-k or a GROUP BY ... HAVING report.
SYNTHETIC_REPORTS: dict[str, str] = {
    "region_revenue_having": """
SELECT `sales`.`channel` AS `channel`, CAST(SUM(`sales`.`amount`) AS DOUBLE) AS `revenue`
FROM (SELECT `sale_id`, `channel`, `amount`, `sale_date` FROM `{ns}`.`sales`
      WHERE (`sale_date` >= '2024-03-01')) AS `sales`
GROUP BY `sales`.`channel`
HAVING (SUM(`sales`.`amount`) > 1000)
""",
    "store_top_revenue_to_date": """
SELECT sales.store_id AS store_id, CAST(SUM(sales.amount) AS DOUBLE) AS revenue, COUNT(1) AS sales_count
FROM (SELECT store_id, amount, sale_date FROM {ns}.sales) AS sales
WHERE ((sales.sale_date BETWEEN TO_DATE('2024-1-1', 'yyyy-M-d') AND TO_DATE('2024-06-30', 'yyyy-M-d')))
GROUP BY sales.store_id
ORDER BY revenue DESC, store_id
LIMIT 10
""",
    "month_count_having": """
SELECT EXTRACT(YEAR FROM sales.sale_date) AS sale_year, EXTRACT(MONTH FROM sales.sale_date) AS sale_month,
       COUNT(*) AS n, CAST(AVG(sales.unit_price) AS DOUBLE) AS avg_price
FROM (SELECT sale_date, unit_price, quantity FROM {ns}.sales WHERE quantity > 10) AS sales
GROUP BY EXTRACT(YEAR FROM sales.sale_date), EXTRACT(MONTH FROM sales.sale_date)
HAVING COUNT(*) > 20
ORDER BY sale_year, sale_month
""",
    "web_share_case_sum": """
SELECT sales.store_id AS store_id,
       CAST(SUM(CASE WHEN sales.channel = 'web' THEN sales.amount ELSE 0 END) AS DOUBLE) AS web_revenue,
       SUM(CASE WHEN sales.channel <> 'web' THEN 1 ELSE 0 END) AS other_sales
FROM (SELECT store_id, channel, amount FROM {ns}.sales) AS sales
GROUP BY sales.store_id
HAVING (SUM(CASE WHEN sales.channel = 'web' THEN sales.amount ELSE 0 END) > 2500)
""",
    "city_join_top": """
SELECT stores.city AS city, CAST(SUM(sales.amount) AS DOUBLE) AS revenue
FROM (SELECT store_id, amount, sale_date FROM {ns}.sales WHERE sale_date > '2023-06-30') AS sales
INNER JOIN (SELECT store_id, city, region FROM {ns}.stores WHERE region IN ('north', 'east')) AS stores
  ON (sales.store_id = stores.store_id)
GROUP BY stores.city
ORDER BY revenue DESC, city
LIMIT 3
""",
    "home_and_ship_city": """
SELECT home.home_city AS home_city, ship.ship_city AS ship_city, COUNT(*) AS shipments
FROM (SELECT store_id, ship_store_id, channel FROM {ns}.sales WHERE (channel = 'phone')) AS sales
JOIN (SELECT store_id AS home_store_id, city AS home_city FROM {ns}.stores) AS home
  ON (sales.store_id = home.home_store_id)
JOIN (SELECT store_id AS ship_store_id, city AS ship_city FROM {ns}.stores) AS ship
  ON (sales.ship_store_id = ship.ship_store_id)
GROUP BY home.home_city, ship.ship_city
HAVING (COUNT(*) > 4)
""",
    "chained_ctes_top": """
WITH filtered AS (
  SELECT sales.customer_id, sales.amount, sales.discount
  FROM {ns}.sales AS sales
  WHERE sales.sale_date >= DATE '2023-03-01' AND sales.channel IN ('web', 'phone')
), by_customer AS (
  SELECT filtered.customer_id AS customer_id, SUM(filtered.amount) AS spent,
         MAX(COALESCE(filtered.discount, 0.0)) AS best_discount
  FROM filtered
  GROUP BY filtered.customer_id
)
SELECT by_customer.customer_id, by_customer.spent, by_customer.best_discount
FROM by_customer
ORDER BY by_customer.spent DESC, by_customer.customer_id
LIMIT 5
""",
    "column_list_derived": """
SELECT t.store, t.total
FROM (SELECT s.store_id, SUM(s.quantity) FROM {ns}.sales s GROUP BY s.store_id) AS t (store, total)
WHERE t.total > 600
ORDER BY t.total DESC, t.store
LIMIT 4
""",
    "string_functions": """
SELECT UPPER(TRIM(stores.region)) AS region, COUNT(1) AS n,
       CAST(ROUND(SUM(sales.unit_price * sales.quantity), 2) AS DOUBLE) AS gross
FROM (SELECT store_id, unit_price, quantity, note FROM {ns}.sales) sales,
     (SELECT store_id, region, city FROM {ns}.stores) stores
WHERE sales.store_id = stores.store_id AND SUBSTRING(stores.city, 1, 5) = 'City0'
  AND LOWER(COALESCE(sales.note, 'none')) LIKE '%note%'
GROUP BY UPPER(TRIM(stores.region))
HAVING COUNT(1) > 10
""",
    "nested_derived_unqualified": """
SELECT store_id, revenue
FROM (
  SELECT store_id, SUM(amount) AS revenue
  FROM (SELECT store_id, amount, quantity FROM {ns}.sales WHERE quantity >= 2) AS sales
  GROUP BY store_id
) AS per_store
WHERE revenue > 5000
ORDER BY revenue DESC, store_id
LIMIT 8
""",
    "tableau_sum_cast_having": """
SELECT `stores`.`region` AS `region`, SUM(CAST(`sales`.`quantity` AS BIGINT)) AS `sum:quantity:ok`,
       SUM(1) AS `cnt:sales:ok`
FROM `{ns}`.`sales` `sales`
INNER JOIN `{ns}`.`stores` `stores` ON (`sales`.`store_id` = `stores`.`store_id`)
GROUP BY `stores`.`region`
HAVING (SUM(CAST(`sales`.`quantity` AS BIGINT)) >= 1000)
""",
    "looker_coalesce_top": """
SELECT
    stores.region  AS `stores.region`,
    COALESCE(SUM(sales.amount ), 0) AS `sales.total_amount`
FROM {ns}.sales  AS sales
LEFT JOIN {ns}.stores  AS stores ON sales.store_id = stores.store_id
WHERE ((( sales.sale_date  ) >= ((TIMESTAMP '2023-06-01'))
  AND ( sales.sale_date  ) < ((TIMESTAMP '2024-06-01'))))
GROUP BY
    1
ORDER BY
    2 DESC
LIMIT 3
""",
    "first_last_and_counts": """
SELECT sales.store_id AS store_id, ROUND(AVG(sales.unit_price), 2) AS avg_price,
       MIN(sales.sale_date) AS first_sale, MAX(sales.channel) AS last_channel, COUNT(sales.note) AS notes
FROM {ns}.sales AS sales
GROUP BY sales.store_id
HAVING ROUND(AVG(sales.unit_price), 2) > 40.5
""",
    "syn_having_sum": """
SELECT `syn`.`a` AS `a`, CAST(SUM(`syn`.`b`) AS DOUBLE) AS `s`
FROM (SELECT `a`, `b`, `c` FROM `{ns}`.`syn` WHERE (`c` > 0)) AS `syn`
GROUP BY `syn`.`a`
HAVING (SUM(`syn`.`b`) > 600)
""",
    "syn_having_count_topk": """
SELECT syn.a AS a, COUNT(*) AS n, CAST(AVG(syn.d) AS DOUBLE) AS avg_d
FROM (SELECT a, d, e FROM {ns}.syn) AS syn
WHERE (syn.e BETWEEN -50 AND 50)
GROUP BY syn.a
HAVING (COUNT(*) > 5)
ORDER BY n DESC, a
LIMIT 10
""",
}
