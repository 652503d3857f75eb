"""`deepep-a4 capacity` (what the project can get, read-only) and `run`'s capacity fallback (docs/deploy.md,
"No capacity")."""
