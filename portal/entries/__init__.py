"""Model and agent entries: a team's declared evaluation of a model (or an agent around
one), n samples per problem judged on the hidden set and scored by pass@k, beside the
people's boards, with an open results dataset (CSV, Parquet)."""
