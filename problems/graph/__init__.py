"""Graph workloads: partitioned graphs, sparse features and recommender embeddings."""
