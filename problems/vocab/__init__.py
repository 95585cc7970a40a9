"""Vocab parallelism: embedding and LM-head matrices split along the vocabulary."""
