"""The operator: system context from contributors, a context budget, multi-turn sessions."""

from rune.operator.blocks import ContextBlock
from rune.operator.budget import ContextBudget
from rune.operator.operator import RuneOperator

__all__ = ["ContextBlock", "ContextBudget", "RuneOperator"]
