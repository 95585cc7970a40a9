"""Data parallelism: replicas of a model that agree on gradients, statistics and losses."""
