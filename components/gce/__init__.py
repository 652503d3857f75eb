"""The GCE platform: the A4 VM fleet, its startup script, benchmarks and results bucket."""
