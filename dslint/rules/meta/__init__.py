"""DSL0xx: what the engine itself reports about a file (syntax and I/O errors, unused noqa)."""
