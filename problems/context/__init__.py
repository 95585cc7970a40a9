"""Context parallelism: long sequences split across ranks for attention and scans."""
