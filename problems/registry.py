"""Finds every problem module under problems/<category>/ and indexes it by slug."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from problems.spec import Category, Problem

_PACKAGES = [c.value for c in Category]


@cache
def _catalog() -> dict[str, Problem]:
    found: dict[str, Problem] = {}
    for package_name in _PACKAGES:
        try:
            package = importlib.import_module(f"problems.{package_name}")
        except ModuleNotFoundError:
            continue
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            problem = getattr(module, "PROBLEM", None)
            if not isinstance(problem, Problem):
                continue
            if problem.slug in found:
                raise RuntimeError(f"duplicate problem slug {problem.slug!r} in {module.__name__}")
            found[problem.slug] = problem
    return dict(sorted(found.items()))


def all_problems() -> list[Problem]:
    return list(_catalog().values())


def get_problem(slug: str) -> Problem:
    try:
        return _catalog()[slug]
    except KeyError:
        raise KeyError(f"unknown problem {slug!r}") from None
