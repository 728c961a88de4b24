"""DSL1xx: file handles opened in dataset code and never closed, or kept."""
