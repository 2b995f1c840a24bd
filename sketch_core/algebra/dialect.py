"""The Spark SQL this project prints: sqlglot's Spark dialect, minus its rewrites for Spark 2.

sqlglot's Spark generator inherits Spark 2's: it prints ``PERCENTILE_CONT(0.5) WITHIN GROUP
(ORDER BY x)`` and ``PERCENTILE_DISC`` as ``PERCENTILE_APPROX(x, 0.5)`` (an approximation, and
the order's direction dropped), and ``TO_CHAR(x, '999.00')`` as ``CAST(x AS STRING)`` (the
format dropped). Spark 3.3 and later run both as written, so a report printed through sqlglot
would silently return other values. Every text this project hands to Spark is printed with
:data:`SPARK`, which keeps them (and quotes names Spark takes only quoted).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark

try:
    from sqlglot.generators.spark import SparkGenerator
except ImportError:  # sqlglot 30.0 nests it in the dialect (later 30.x define it apart)
    SparkGenerator = Spark.Generator  # type: ignore[misc]


# What Spark's parser takes unquoted. sqlglot leaves a name bare when it matches ``\w`` (any
# letter of any script), so a report's `priorité` column came back printed bare and Spark
# refused the service's text (INVALID_IDENTIFIER) where the user's own ran.
_BARE_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


class SparkSql(Spark):
    """sqlglot's Spark dialect, printing ``WITHIN GROUP`` and ``TO_CHAR`` as written, and
    quoting every name that is not plain ASCII."""

    class Generator(SparkGenerator):
        TRANSFORMS: ClassVar[dict[type[exp.Expr], Callable[..., Any]]] = {
            **{kind: how for kind, how in SparkGenerator.TRANSFORMS.items() if kind is not exp.WithinGroup},
            exp.ToChar: lambda self, e: self.function_fallback_sql(e),
        }

        def identifier_sql(self, expression: exp.Identifier) -> str:
            if not expression.quoted and not _BARE_IDENTIFIER.match(expression.name):
                expression = exp.Identifier(this=expression.name, quoted=True)
            return str(super().identifier_sql(expression))


SPARK = SparkSql()
