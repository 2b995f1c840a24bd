"""Cost model, arrival prediction and state budget: deciding when and how to maintain (pure)."""

from sketch_core.costs.choose import ACTIONS, Choice, Situation, choose
from sketch_core.costs.model import DEFAULT_PRIORS, OPERATIONS, CostModel, LinearCost, Observation, fit

__all__ = [
    "ACTIONS",
    "DEFAULT_PRIORS",
    "OPERATIONS",
    "Choice",
    "CostModel",
    "LinearCost",
    "Observation",
    "Situation",
    "choose",
    "fit",
]
