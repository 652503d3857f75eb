"""`deepep-a4 run`: the pieces moved out of deepep_a4/run_*.py."""
