"""Geometric and spatial workloads: grids, fields and scenes split across ranks."""
