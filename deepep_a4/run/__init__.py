"""`deepep-a4 run`: preflight, up, install wait, benchmarks, report, destroy (command.py), the platforms' probes
(platforms.py), the checks before anything is created (preflight.py) and its help text (help.py)."""
