"""Runs bundles on a host's ranks and judges them. Imports nothing from portal/."""
