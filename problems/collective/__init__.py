"""Collective primitives: the building blocks every other category is made of."""
