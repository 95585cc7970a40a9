"""Bundles that teams submit, their evaluation's life cycle and per-problem results."""
