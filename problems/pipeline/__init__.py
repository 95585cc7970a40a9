"""Pipeline parallelism: a model cut into stages, one per rank, fed micro-batch by micro-batch."""
