"""Expert parallelism: mixture-of-experts layers whose experts live on different ranks."""
