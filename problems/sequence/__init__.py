"""Sequence parallelism: activations split along the sequence between TP regions."""
