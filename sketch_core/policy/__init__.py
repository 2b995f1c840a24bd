"""Maintenance policies: when intermittent maintenance brings a sketch up to date (pure logic)."""

from sketch_core.policy.evaluate import Decision, PolicyFacts, evaluate
from sketch_core.policy.policy import DEFAULT_POLICY, REPORT_WINDOW_SECONDS, Policy, effective_policy

__all__ = [
    "DEFAULT_POLICY",
    "REPORT_WINDOW_SECONDS",
    "Decision",
    "Policy",
    "PolicyFacts",
    "effective_policy",
    "evaluate",
]
