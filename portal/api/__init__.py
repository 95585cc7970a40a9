"""The REST API (read-only for now): thin views over the apps' selectors."""
