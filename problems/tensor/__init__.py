"""Tensor parallelism: layers split across ranks along hidden or head dimensions."""
