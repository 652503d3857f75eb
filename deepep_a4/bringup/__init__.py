"""`deepep-a4 bringup`: bring-up tables from status files (command.py); the expected times it compares with are
the shared deepep_a4/expected_times.py."""
