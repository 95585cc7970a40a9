"""Other distributed workloads: sorting, selection and scientific blocks."""
