"""The optimizer rules the service excludes for right answers, added to a session's own."""

from __future__ import annotations

from sketch_core.spark.session import WRONG_RESULT_RULES, excluded_rules


def test_the_wrong_result_rules_are_added_once_to_the_sessions_own_exclusions() -> None:
    assert excluded_rules(None).split(",") == list(WRONG_RESULT_RULES)
    mine = "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"
    assert excluded_rules(f" {mine} ,").split(",") == [mine, *WRONG_RESULT_RULES]
    twice = excluded_rules(excluded_rules(mine))
    assert twice.split(",") == [mine, *WRONG_RESULT_RULES]
