"""IR scalar expressions (sqlglot, Spark semantics) as Arrow compute expressions.

The incremental engine evaluates selections and projections over small annotated deltas
in-process, with Arrow; these must agree with Spark on the rows a selection keeps and the
values a projection computes, or a maintained sketch would drift from a fresh capture. The
translation covers what the supported queries use (arithmetic, comparisons, boolean logic with
SQL's three-valued semantics, IN, BETWEEN, LIKE, CASE, CAST, IS NULL, substring, coalesce, and
the built-in functions of :mod:`~sketch_core.incremental.functions`) and raises
:class:`UnsupportedQueryError` for anything else instead of guessing: the maintenance service
then has Spark evaluate that expression (:mod:`~sketch_core.incremental.remote`), and without a
remote evaluator maintenance falls back to a full capture.

Where Arrow's typing differs from Spark's it is aligned here: an integer literal in decimal
arithmetic becomes a decimal of its own digits (Spark widens it the same way, and Arrow would
otherwise refuse), and ``/`` divides as doubles unless an operand is a decimal.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.dialect import SPARK
from sketch_core.algebra.ir import COMPARISON_OPERATORS
from sketch_core.arrow.plans import filter_table, project_table
from sketch_core.errors import UnsupportedQueryError
from sketch_core.incremental.dates import add_months
from sketch_core.incremental.functions import translate_function
from sketch_core.incremental.remote import RemoteEvaluator, referenced_columns, remote_column
from sketch_core.lru import LruMap


def _unsupported(expression: exp.Expr) -> UnsupportedQueryError:
    return UnsupportedQueryError(
        f"the expression {type(expression).__name__} in incremental maintenance",
        expression.sql(dialect=SPARK),
        hint="maintain this sketch with strategy='full'",
    )


def evaluate(table: pa.Table, outputs: dict[str, pc.Expression]) -> pa.Table:
    """A table of the named expressions over ``table``'s rows."""
    return project_table(table, outputs)


def filter_rows(table: pa.Table, condition: pc.Expression) -> pa.Table:
    """The rows where ``condition`` is true (not false, not NULL), as SQL's WHERE keeps them."""
    return filter_table(table, _true(condition))


class Translated:
    """Named IR expressions translated once per input schema.

    Translating probes operand types with small Arrow plans (about a millisecond for a
    selection of a few comparisons), and an engine node sees the same schema batch after
    batch: without this, every maintenance run paid that again for each selection and
    projection.

    With ``remote`` (see :mod:`.remote`), an expression the translation refuses is evaluated
    by it instead: :meth:`over` adds its value to the rows as a column, and the translation
    reads that column."""

    _MAX_SCHEMAS = 8  # a node sees one or two (delta rows, current rows); more is a surprise

    def __init__(
        self, expressions: dict[str, exp.Expr], remote: RemoteEvaluator | None = None, ansi: bool = True
    ) -> None:
        self.expressions = expressions
        self.remote = remote
        self.ansi = ansi
        self._by_schema: LruMap[pa.Schema, tuple[dict[str, pc.Expression], list[str]]] = LruMap(
            self._MAX_SCHEMAS
        )
        self._remote_types: dict[tuple[pa.Schema, str], pa.DataType] = {}

    def __call__(self, schema: pa.Schema) -> dict[str, pc.Expression]:
        """The expressions over ``schema``'s columns (remote ones read the columns :meth:`over`
        adds)."""
        return self._translated(schema)[0]

    def remote_names(self, schema: pa.Schema) -> list[str]:
        """The expressions over ``schema`` that are evaluated remotely."""
        return self._translated(schema)[1]

    def _translated(self, schema: pa.Schema) -> tuple[dict[str, pc.Expression], list[str]]:
        found = self._by_schema.get(schema)
        if found is None:
            translate = ExpressionTranslator(schema, self.ansi)
            translated, remote = {}, []
            for name, expression in self.expressions.items():
                try:
                    translated[name] = translate(expression)
                except UnsupportedQueryError:
                    if self.remote is None:
                        raise
                    translated[name] = pc.field(remote_column(name))
                    remote.append(name)
            found = (translated, remote)
            self._by_schema.put(schema, found)
        return found

    def over(self, table: pa.Table) -> tuple[pa.Table, dict[str, pc.Expression]]:
        """``table`` with the remote expressions' columns added, and the expressions over it."""
        translated, names = self._translated(table.schema)
        if not names:
            return table, translated
        assert self.remote is not None
        values = self._remote_values(table, names)
        for name in names:
            table = table.append_column(remote_column(name), values[name])
        return table, translated

    def _remote_values(self, table: pa.Table, names: list[str]) -> dict[str, pa.ChunkedArray | pa.Array]:
        known = [(table.schema, n) in self._remote_types for n in names]
        if table.num_rows == 0 and all(known):  # no rows: no Spark job, only the types
            return {n: pa.array([], self._remote_types[(table.schema, n)]) for n in names}
        assert self.remote is not None
        wanted = {n: self.expressions[n] for n in names}
        inputs = list(dict.fromkeys(c for e in wanted.values() for c in referenced_columns(e)))
        result = self.remote(table.select(inputs), wanted)
        if result.num_rows != table.num_rows:
            raise UnsupportedQueryError(
                f"the remote evaluation returned {result.num_rows} rows for {table.num_rows}",
                ", ".join(e.sql(dialect=SPARK) for e in wanted.values())[:200],
                hint="maintain this sketch with strategy='full'",
            )
        for name in names:
            self._remote_types[(table.schema, name)] = result.column(name).type
        return {n: result.column(n) for n in names}


class ExpressionTranslator:
    """Translates expressions over the columns of ``schema`` (names are unique in the IR)."""

    def __init__(self, schema: pa.Schema, ansi: bool = True) -> None:
        """``ansi``: whether the session runs with ``spark.sql.ansi.enabled`` (Spark 4's
        default). The rules here are ANSI mode's (an overflow or a division by zero fails);
        without it only column references and literals are translated, and everything else is
        refused, for Spark to evaluate (see :mod:`.remote`)."""
        self.schema = schema
        self.ansi = ansi
        self._empty = schema.empty_table()
        # The rows on which the expression being translated is evaluated by Spark (None: all).
        self._guard: pc.Expression | None = None

    def type_of(self, expression: pc.Expression) -> pa.DataType:
        return evaluate(self._empty, {"t": expression}).schema.field("t").type

    def __call__(self, expression: exp.Expr) -> pc.Expression:
        if not self.ansi and not isinstance(expression, _BARE):
            raise UnsupportedQueryError(
                "an expression under spark.sql.ansi.enabled=false in incremental maintenance "
                "(the engine's rules are ANSI mode's)",
                expression.sql(dialect=SPARK),
                hint="maintain this sketch with strategy='full', or run Spark in ANSI mode",
            )
        return self.translate(expression)

    def translate(self, node: exp.Expr) -> pc.Expression:
        translated = self._translate(node)
        # sqlglot marks NOT LIKE / NOT IN / NOT BETWEEN on the node itself.
        return ~translated if node.args.get("negate") else translated

    def guarded(self, node: exp.Expr, guard: pc.Expression) -> pc.Expression:
        """``node`` translated for the rows where ``guard`` is true, NULL on the others.

        Spark evaluates a CASE branch, IF's arms, COALESCE's later arguments and the right
        side of AND/OR only on the rows that reach them, so an overflow or a division by zero
        on another row is no error there; Arrow evaluates every argument on every row. Each
        column of a guarded expression is NULL outside its guard, so nothing is computed there
        (every operator here gives NULL for NULL inputs) and nothing can fail."""
        if not _may_fail(node):
            # Its values outside the guard are never used (every caller masks them), and it
            # cannot fail there: guarding it would only grow the expression (a chain of
            # ANDs guards each conjunct by all before it, and nests of those multiply).
            return self.translate(node)
        outer = self._guard
        self._guard = guard if outer is None else pc.Expression._call("and_kleene", [outer, guard])
        try:
            return self.translate(node)
        finally:
            self._guard = outer

    def _column(self, name: str) -> pc.Expression:
        """A column, NULL outside the current guard. Literals are left as they are: a
        constant alone cannot fail, and guarding the columns is enough to keep an operator
        from failing where Spark does not evaluate it (each is NULL on NULL input)."""
        value = pc.field(name)
        if self._guard is None:
            return value
        kind = self.schema.field(name).type
        return pc.Expression._call("if_else", [_true(self._guard), value, pc.scalar(pa.scalar(None, kind))])

    def _translate(self, node: exp.Expr) -> pc.Expression:
        if isinstance(node, exp.Paren):
            return self.translate(node.this)
        if isinstance(node, exp.Column):
            if node.name not in self.schema.names:
                raise UnsupportedQueryError(
                    f"unknown column {node.name} in incremental maintenance", node.name
                )
            return self._column(node.name)
        if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
            value = _literal(node)
            if isinstance(value, int) and not isinstance(value, bool):
                # Spark types an integer literal INT when it fits (so 2147483647 + 1 overflows).
                value = pa.scalar(value, pa.int32() if -(2**31) <= value < 2**31 else pa.int64())
            return pc.scalar(value)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        if isinstance(node, exp.And):  # the right side only where the left is not false
            left = self.translate(node.this)
            return left & self.guarded(node.expression, ~_false(left))
        if isinstance(node, exp.Or):  # the right side only where the left is not true
            left = self.translate(node.this)
            return left | self.guarded(node.expression, ~_true(left))
        if isinstance(node, exp.Not):
            return ~self.translate(node.this)
        if isinstance(node, exp.Neg):
            return pc.Expression._call("negate_checked", [self.translate(node.this)])
        if type(node) in COMPARISON_OPERATORS:
            left, right = self.operands(node.this, node.expression)
            a, b = self.type_of(left), self.type_of(right)
            if pa.types.is_floating(a) or pa.types.is_floating(b):
                return _nan_aware_comparison(type(node), left, right)
            if pa.types.is_decimal(a) and pa.types.is_decimal(b) and a != b:
                # Spark compares in the wider type, bounded to 38 digits (widerDecimalType);
                # Arrow's common type would take up to 39 or more and refuse.
                scale = max(a.scale, b.scale)
                digits = max(a.precision - a.scale, b.precision - b.scale)
                wider = pa.decimal128(min(38, digits + scale), min(38, scale))
                left, right = self.cast_to(left, wider), self.cast_to(right, wider)
            return COMPARISON_OPERATORS[type(node)](left, right)
        if isinstance(node, exp.NullSafeEQ):
            left, right = self.operands(node.this, node.expression, null_intolerant=False)
            both_null = left.is_null() & right.is_null()
            equal = _true(left == right)
            return both_null | (left.is_valid() & right.is_valid() & equal)
        if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
            shifted = constant_date(node)
            if shifted is not None:
                return pc.scalar(shifted)
            return self._shifted_dates(node)
        if type(node) in _ARITHMETIC:
            left, right = self.operands(node.this, node.expression)
            if isinstance(node, exp.Mul):
                return self.multiply(left, right)
            a, b = self.type_of(left), self.type_of(right)
            if isinstance(node, exp.Add) and pa.types.is_integer(a) and pa.types.is_date(b):
                left, right, a, b = right, left, b, a
            if pa.types.is_date(a) and pa.types.is_integer(b):  # Spark's date_add / date_sub
                days = right.cast(pa.int32())
                shift = "add_checked" if isinstance(node, exp.Add) else "subtract_checked"
                return pc.Expression._call(shift, [left.cast(pa.int32()), days]).cast(pa.date32())
            if pa.types.is_decimal(a) and pa.types.is_decimal(b):
                digits = max(a.precision - a.scale, b.precision - b.scale) + 1
                if digits + max(a.scale, b.scale) > 38:  # Spark would cut the scale: not modelled
                    raise _unsupported(node)
            return pc.Expression._call(_ARITHMETIC[type(node)], [left, right])
        if isinstance(node, exp.Div):
            return self.divide(node)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return self.translate(node.this).is_null()
        if isinstance(node, exp.Between):  # Spark's rewrite: low <= x AND x <= high
            value = node.this
            return self.translate(
                exp.And(
                    this=exp.GTE(this=value, expression=node.args["low"]),
                    expression=exp.LTE(this=value.copy(), expression=node.args["high"]),
                )
            )
        if isinstance(node, exp.In):
            return self.is_in(node)
        if isinstance(node, exp.Like):
            pattern = node.expression
            if not isinstance(pattern, exp.Literal) or not pattern.is_string:
                raise _unsupported(node)
            options = pc.MatchSubstringOptions(pattern.this)
            return pc.Expression._call("match_like", [self.translate(node.this)], options)
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, exp.If):
            condition = _true(self.translate(node.this))
            arms = [node.args["true"], node.args.get("false") or exp.Null()]
            chosen, otherwise = self.common_type(arms, [condition, ~condition])
            return pc.Expression._call("if_else", [condition, chosen, otherwise])
        if isinstance(node, exp.Coalesce):
            return self.coalesce([node.this, *node.expressions])
        if isinstance(node, exp.TsOrDsToDate) and not node.args.get("format"):
            value = self.translate(node.this)
            return value if self.type_of(value) == pa.date32() else value.cast(pa.date32())
        if isinstance(node, exp.Substring):
            return self.substring(node)
        function = translate_function(self, node)
        if function is None:
            raise _unsupported(node)
        return function

    # -- pieces --------------------------------------------------------------------------------
    def operands(
        self, left: exp.Expr, right: exp.Expr, null_intolerant: bool = True
    ) -> tuple[pc.Expression, pc.Expression]:
        """Both operands, an integer literal meeting a decimal widened as Spark widens it.

        ``null_intolerant``: the operator is NULL when an operand is; Spark then evaluates the
        right operand only where the left is not NULL (so its errors happen only there)."""
        a = self.translate(left)
        b = self.guarded(right, a.is_valid()) if null_intolerant else self.translate(right)
        if _is_int_literal(left) and pa.types.is_decimal(self.type_of(b)):
            a = pc.scalar(_integer_decimal(left))
        elif _is_int_literal(right) and pa.types.is_decimal(self.type_of(a)):
            b = pc.scalar(_integer_decimal(right))
        kinds = self.type_of(a), self.type_of(b)
        # An integer meeting a decimal becomes a decimal of its type's digits; a decimal
        # meeting a double becomes a double (Spark's DecimalPrecision and ImplicitTypeCasts).
        # An integer meeting a double is cast explicitly too: Acero's implicit cast of a bound
        # expression loses it (1e10D + i gave 1e10 for every i; Arrow's eager kernel and Spark
        # give 1e10 + i).
        if pa.types.is_decimal(kinds[1]) and pa.types.is_integer(kinds[0]):
            a = self.cast_to(a, _integer_as_decimal(kinds[0]))
        elif pa.types.is_decimal(kinds[0]) and pa.types.is_integer(kinds[1]):
            b = self.cast_to(b, _integer_as_decimal(kinds[1]))
        elif pa.types.is_floating(kinds[1]) and not pa.types.is_floating(kinds[0]):
            a = a.cast(pa.float64()) if _is_number(kinds[0]) else a
        elif pa.types.is_floating(kinds[0]) and not pa.types.is_floating(kinds[1]):
            b = b.cast(pa.float64()) if _is_number(kinds[1]) else b
        return a, b

    def _shifted_dates(self, node: exp.Add | exp.Sub) -> pc.Expression:
        """A date column plus or minus ``INTERVAL 'n' DAY|WEEK|MONTH|YEAR`` (a literal n)."""
        interval = node.expression
        unit = interval.args.get("unit")
        amount = interval.this.this if isinstance(interval.this, exp.Literal) else None
        if unit is None or amount is None or not str(amount).lstrip("-").isdigit():
            raise _unsupported(node)
        start = self.translate(node.this)
        name = unit.name.upper()
        if not pa.types.is_date(self.type_of(start)) or name not in {**_INTERVAL_DAYS, **_INTERVAL_MONTHS}:
            raise _unsupported(node)
        count = int(amount) * (-1 if isinstance(node, exp.Sub) else 1)
        if name in _INTERVAL_MONTHS:
            return add_months(start, pc.scalar(pa.scalar(count * _INTERVAL_MONTHS[name], pa.int64())))
        days = pc.scalar(pa.scalar(count * _INTERVAL_DAYS[name], pa.int32()))
        return pc.Expression._call("add_checked", [start.cast(pa.int32()), days]).cast(pa.date32())

    def multiply(self, left: pc.Expression, right: pc.Expression) -> pc.Expression:
        """A product; decimals typed as Spark types them (precision at most 38, the scale cut
        to keep integer digits, rounding half up, but to no fewer than 6 places)."""
        a, b = self.type_of(left), self.type_of(right)
        if not (pa.types.is_decimal(a) and pa.types.is_decimal(b)):
            return pc.Expression._call("multiply_checked", [left, right])
        precision, scale = a.precision + b.precision + 1, a.scale + b.scale
        if precision <= 38:
            return pc.Expression._call("multiply_checked", [left, right])
        target_scale = spark_decimal(precision, scale).scale
        # Arrow types the exact product as decimal(p1 + p2 + 1); narrow the wider operand so
        # that fits (values too large for it raise, as they would overflow Spark's type too).
        spare = precision - 38
        if a.precision - a.scale >= b.precision - b.scale:
            left = left.cast(pa.decimal128(a.precision - spare, a.scale))
        else:
            right = right.cast(pa.decimal128(b.precision - spare, b.scale))
        product = pc.Expression._call("multiply_checked", [left, right])
        if target_scale < scale:
            product = pc.Expression._call("round", [product], pc.RoundOptions(target_scale, "half_up"))
        return product.cast(pa.decimal128(38, target_scale))

    def divide(self, node: exp.Div) -> pc.Expression:
        left, right = self.operands(node.this, node.expression)
        a, b = self.type_of(left), self.type_of(right)
        if pa.types.is_decimal(a) and pa.types.is_decimal(b):
            return self.decimal_quotient(node, left, a, right, b)
        left, right = left.cast(pa.float64()), right.cast(pa.float64())
        # Spark 4 runs in ANSI mode: a division by zero is an error there, and so it is here.
        return pc.Expression._call("divide_checked", [left, right])

    def decimal_quotient(
        self,
        node: exp.Div,
        left: pc.Expression,
        a: pa.Decimal128Type,
        right: pc.Expression,
        b: pa.Decimal128Type,
    ) -> pc.Expression:
        """Spark's decimal quotient: typed decimal(p1 - s1 + s2 + s, s) with s = max(6, s1 + p2
        + 1) (cut as any result over 38 digits), rounded half away from zero. Arrow's decimal
        division truncates at the dividend's scale less the divisor's: so the dividend is
        rescaled to give one digit more than Spark keeps, and that digit decides the rounding."""
        scale = max(6, a.scale + b.precision + 1)
        target = spark_decimal(a.precision - a.scale + b.scale + scale, scale)
        dividend_scale = target.scale + 1 + b.scale
        dividend_precision = a.precision - a.scale + dividend_scale
        if dividend_precision > 38:
            raise _unsupported(node)
        widened = left.cast(pa.decimal128(dividend_precision, dividend_scale))
        quotient = pc.Expression._call("divide_checked", [widened, right])
        rounded = pc.Expression._call(
            "round", [quotient], pc.RoundOptions(target.scale, "half_towards_infinity")
        ).cast(target)
        try:  # Arrow types the quotient with digits of its own: it may not have them
            self.type_of(rounded)
        except pa.ArrowInvalid:
            raise _unsupported(node) from None
        return rounded

    def cast(self, node: exp.Cast) -> pc.Expression:
        target = _arrow_type(node.to)
        inner = node.this
        if isinstance(inner, exp.Literal) and inner.is_string and target == pa.date32():
            return pc.scalar(dt.date.fromisoformat(inner.this))
        value = self.translate(inner)
        if pa.types.is_decimal(target) and pa.types.is_floating(self.type_of(value)):
            raise _unsupported(node)  # Spark rounds the double's shortest decimal form
        return self.cast_to(value, target)

    def cast_to(self, value: pc.Expression, target: pa.DataType) -> pc.Expression:
        """``value`` cast to ``target`` as Spark's ANSI cast does: a value that does not fit
        fails, a fraction dropped toward zero for integers, rounded half away from zero for a
        decimal of fewer places."""
        source = self.type_of(value)
        if source == target:
            return value
        if pa.types.is_integer(target) and (pa.types.is_floating(source) or pa.types.is_decimal(source)):
            # Spark drops the fraction (toward zero); Arrow refuses a cast that would lose it.
            # What does not fit the integer type still fails, as under Spark's ANSI mode.
            if pa.types.is_decimal(source):  # Arrow wants room for the rounding's carry
                if source.precision >= 38:
                    raise UnsupportedQueryError(
                        f"a cast of {source} to {target} in incremental maintenance", str(source)
                    )
                value = value.cast(pa.decimal128(source.precision + 1, source.scale))
            return pc.Expression._call("trunc", [value]).cast(target)
        if pa.types.is_decimal(target) and pa.types.is_integer(source):
            # Arrow wants room for every value of the integer type; Spark only for the value.
            room = _integer_as_decimal(source).precision + target.scale
            return value.cast(pa.decimal128(min(room, 38), target.scale)).cast(target)
        if pa.types.is_decimal(target) and pa.types.is_decimal(source) and target.scale < source.scale:
            if source.precision >= 38:
                raise UnsupportedQueryError(
                    f"a cast of {source} to {target} in incremental maintenance", str(source)
                )
            # Arrow rounds within the input's type, where a carry (9.95 to 10.0) overflows
            # silently: a digit more first. Ties go away from zero, as Java's HALF_UP.
            wider = value.cast(pa.decimal128(source.precision + 1, source.scale))
            rounded = pc.Expression._call(
                "round", [wider], pc.RoundOptions(target.scale, "half_towards_infinity")
            )
            return rounded.cast(target)
        return value.cast(target)

    def is_in(self, node: exp.In) -> pc.Expression:
        if node.args.get("query") is not None or not node.expressions:
            raise _unsupported(node)
        constants = [_negated_number(v) or v for v in node.expressions]
        values = [_literal(v) for v in constants if isinstance(v, exp.Literal | exp.Null)]
        if len(values) != len(node.expressions):
            raise _unsupported(node)
        if all(v is None for v in values):  # Spark folds it to NULL: the value is never evaluated
            return _NULL_BOOL
        value = self.translate(node.this)
        found = pc.Expression._call(
            "is_in", [value], pc.SetLookupOptions(pa.array([v for v in values if v is not None]))
        )
        # SQL: NULL IN (...) is unknown, and so is a miss when the list holds a NULL.
        missed = _NULL_BOOL if None in values else pc.scalar(False)
        known = pc.Expression._call("if_else", [found, pc.scalar(True), missed])
        return pc.Expression._call("if_else", [value.is_null(), _NULL_BOOL, known])

    def case(self, node: exp.Case) -> pc.Expression:
        if node.this is not None:
            raise _unsupported(node)  # CASE x WHEN ...: the front end writes searched CASEs
        # Each condition is evaluated where no earlier one held, each branch where it is taken.
        conditions: list[pc.Expression] = []
        reached: pc.Expression = pc.scalar(True)
        for when in node.args["ifs"]:
            held = _true(self.guarded(when.this, reached))
            conditions.append(held)
            reached = reached & ~held
        taken = [*(c for c in conditions), reached]
        branches = [w.args["true"] for w in node.args["ifs"]]
        default = node.args.get("default")
        values = self.common_type([*branches, default if default is not None else exp.Null()], taken)
        names = [f"c{i}" for i in range(len(conditions))]
        struct = pc.Expression._call("make_struct", conditions, pc.MakeStructOptions(names))
        return pc.Expression._call("case_when", [struct, *values])

    def coalesce(self, nodes: list[exp.Expr]) -> pc.Expression:
        """COALESCE: each argument evaluated where the earlier ones are all NULL (Spark stops
        at the first value), in the arguments' common type."""
        translated = [self.translate(nodes[0])]
        missing = translated[0].is_null()
        for later in nodes[1:]:
            translated.append(self.guarded(later, missing))
            missing = missing & translated[-1].is_null()
        return pc.Expression._call("coalesce", self.unified(translated))

    def common_type(
        self, nodes: list[exp.Expr], guards: list[pc.Expression | None] | None = None
    ) -> list[pc.Expression]:
        """The branches of a CASE (IF, COALESCE, GREATEST) cast to one type, as Spark coerces
        them: NULLs and integer literals take the type of the other branches; integers meeting
        decimals become decimals of their type's digits, and decimals widen to hold them all.
        ``guards``: where each branch is evaluated (see :meth:`guarded`)."""
        if guards is None:
            translated = [self.translate(n) for n in nodes]
        else:
            translated = [
                self.translate(n) if g is None else self.guarded(n, g)
                for n, g in zip(nodes, guards, strict=True)
            ]
        return self.unified(translated)

    def unified(self, translated: list[pc.Expression]) -> list[pc.Expression]:
        """Translated branches cast to their common type (see :meth:`common_type`)."""
        kinds = [self.type_of(t) for t in translated]
        known = [k for k in kinds if k != pa.null()]
        if not known:
            return translated
        decimals = [k for k in known if pa.types.is_decimal(k)]
        integers = [k for k in known if pa.types.is_integer(k)]
        if any(pa.types.is_floating(k) for k in known):
            target: pa.DataType = pa.float64()
        elif decimals:
            exact = decimals + [_integer_as_decimal(k) for k in integers]
            scale = max(k.scale for k in exact)
            digits = max(k.precision - k.scale for k in exact)
            target = pa.decimal128(min(digits + scale, 38), scale)
        elif integers and len(integers) == len(known):
            target = max(integers, key=lambda k: k.bit_width)
        else:
            target = known[0]
        out = []
        for expression, kind in zip(translated, kinds, strict=True):
            if kind == target:
                out.append(expression)
            else:
                out.append(self.cast_to(expression, target))
        return out

    def substring(self, node: exp.Substring) -> pc.Expression:
        """Spark's ``SUBSTRING(s, pos[, len])`` (UTF8String.substringSQL) with literal
        positions: ``pos`` counts from 1, 0 is the first character too, and a negative one
        counts from the end; the part of ``[start, start + len)`` inside the string, empty when
        ``len <= 0``. Arrow's slice counts negative bounds from the end the same way."""
        start, length = _int_literal(node.args.get("start")), _int_literal(node.args.get("length"))
        if start is None or (node.args.get("length") is not None and length is None):
            raise _unsupported(node)
        value = self.translate(node.this)
        end_of_string = 2**31 - 1
        if length is not None and length <= 0:
            first, stop = 0, 0
        elif start < 0:
            first = start
            stop = end_of_string if length is None or start + length >= 0 else start + length
        else:
            first = max(start - 1, 0)
            stop = end_of_string if length is None else first + length
        options = pc.SliceOptions(first, stop)
        return pc.Expression._call("utf8_slice_codeunits", [value], options)


_NULL_BOOL = pc.scalar(pa.scalar(None, pa.bool_()))

# What evaluates the same with and without ANSI mode: a column as it is, a literal.
_BARE: tuple[type[exp.Expr], ...] = (exp.Column, exp.Literal, exp.Boolean, exp.Null)


# Nodes whose evaluation cannot fail when their inputs do not: a subtree of only these needs
# no guard (see ExpressionTranslator.guarded). Arithmetic, casts and functions can fail.
_CANNOT_FAIL: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.Between,
    exp.In,
    exp.Like,
    exp.NullSafeEQ,
    exp.Case,
    exp.If,
    exp.Coalesce,
    *COMPARISON_OPERATORS,
)


def _may_fail(node: exp.Expr) -> bool:
    return any(not isinstance(n, _CANNOT_FAIL) for n in node.walk())


def _true(condition: pc.Expression) -> pc.Expression:
    """Where ``condition`` is true (NULL counts as not true)."""
    return pc.Expression._call("coalesce", [condition, pc.scalar(False)])


def _false(condition: pc.Expression) -> pc.Expression:
    """Where ``condition`` is false (NULL counts as not false)."""
    return pc.Expression._call("coalesce", [~condition, pc.scalar(False)])


# Spark's DecimalType.forType: the digits an integer type's values need.
_INTEGER_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}


def _integer_as_decimal(kind: pa.DataType) -> pa.Decimal128Type:
    return pa.decimal128(_INTEGER_DIGITS[kind.bit_width], 0)


def spark_decimal(precision: int, scale: int) -> pa.Decimal128Type:
    """The type Spark gives an exact decimal result of ``precision`` and ``scale`` when that
    exceeds 38 digits (DecimalType.adjustPrecisionScale): the scale cut to keep the integer
    digits, but to no fewer than 6 places."""
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal128(38, max(38 - (precision - scale), min(scale, 6)))


def _nan_aware_comparison(kind: type, left: pc.Expression, right: pc.Expression) -> pc.Expression:
    """Spark orders NaN above every other double and equal to itself; IEEE comparisons do not."""
    left_nan = pc.Expression._call("is_nan", [left.cast(pa.float64())])
    right_nan = pc.Expression._call("is_nan", [right.cast(pa.float64())])
    equal = (left == right) | (left_nan & right_nan)
    less = (left < right) | (~left_nan & right_nan)
    greater = (left > right) | (left_nan & ~right_nan)
    by_kind: dict[type, pc.Expression] = {exp.EQ: equal, exp.NEQ: ~equal, exp.LT: less, exp.GT: greater}
    by_kind[exp.LTE] = less | equal
    by_kind[exp.GTE] = greater | equal
    return by_kind[kind]


_ARITHMETIC: dict[type, str] = {
    exp.Add: "add_checked",
    exp.Sub: "subtract_checked",
    exp.Mul: "multiply_checked",
}


_INTERVAL_MONTHS = {"MONTH": 1, "MONTHS": 1, "YEAR": 12, "YEARS": 12}
_INTERVAL_DAYS = {"DAY": 1, "DAYS": 1, "WEEK": 7, "WEEKS": 7}


def constant_date(node: exp.Expr) -> dt.date | None:
    """The date a constant date expression stands for (``DATE '1994-01-01' + INTERVAL 3
    MONTHS``, as TPC-H writes its ranges), or None when it is not one. Months are added as
    Spark adds them: the day is cut to the end of a shorter month."""
    if isinstance(node, exp.Paren):
        return constant_date(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        if node.to.this != exp.DataType.Type.DATE:
            return None
        try:
            return dt.date.fromisoformat(node.this.this)
        except ValueError:
            return None
    if not (isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval)):
        return None
    start, interval = constant_date(node.this), node.expression
    unit = interval.args.get("unit")
    amount = interval.this.this if isinstance(interval.this, exp.Literal) else None
    if start is None or unit is None or amount is None or not str(amount).lstrip("-").isdigit():
        return None
    count = int(amount) * (-1 if isinstance(node, exp.Sub) else 1)
    name = unit.name.upper()
    if name in _INTERVAL_DAYS:
        return start + dt.timedelta(days=count * _INTERVAL_DAYS[name])
    if name not in _INTERVAL_MONTHS:
        return None
    months = start.year * 12 + start.month - 1 + count * _INTERVAL_MONTHS[name]
    year, month = divmod(months, 12)
    following = dt.date(year + (month + 1) // 12, (month + 1) % 12 + 1, 1)
    return dt.date(year, month + 1, min(start.day, (following - dt.timedelta(days=1)).day))


def _negated_number(node: exp.Expr) -> exp.Literal | None:
    """``-1`` (a negation of a number literal) as the literal ``-1``; None for anything else."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return exp.Literal(this=f"-{node.this.this}", is_string=False)
    return None


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_decimal(kind))


def _is_int_literal(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit()


def _int_literal(node: exp.Expr | None) -> int | None:
    """An integer literal's value, negated ones (``-2``) included; None for anything else."""
    if isinstance(node, exp.Neg):
        inner = _int_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Paren):
        return _int_literal(node.this)
    return int(node.this) if _is_int_literal(node) else None  # type: ignore[union-attr]


def _integer_decimal(node: exp.Expr) -> pa.Scalar:
    digits = len(node.this.lstrip("-"))
    return pa.scalar(Decimal(node.this), pa.decimal128(max(digits, 1), 0))


def _literal(node: exp.Expr) -> object:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    assert isinstance(node, exp.Literal)
    if node.is_string:
        return node.this
    text = node.this
    if text.lstrip("-").isdigit():
        return int(text)
    if "e" in text.lower():
        return float(text)
    return Decimal(text)  # Spark reads 0.05 as a decimal literal


_TYPES: dict[object, pa.DataType] = {
    exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us"),
}


def _arrow_type(kind: exp.DataType) -> pa.DataType:
    if kind.this == exp.DataType.Type.DECIMAL:
        params = [
            int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name) for p in kind.expressions
        ]
        precision, scale = (params + [10, 0][len(params) :])[:2] if params else (10, 0)
        return pa.decimal128(precision, scale)
    if kind.this in _TYPES:
        return _TYPES[kind.this]
    raise UnsupportedQueryError(
        f"a cast to {kind.sql(dialect='spark')} in incremental maintenance", kind.sql()
    )
