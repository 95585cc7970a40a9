"""The problem catalog: plain Python, importable by the portal and by GPU hosts alike."""

from problems.registry import all_problems, get_problem
from problems.spec import Case, Category, InputContext, Problem, Tolerance

__all__ = [
    "Case",
    "Category",
    "InputContext",
    "Problem",
    "Tolerance",
    "all_problems",
    "get_problem",
]
