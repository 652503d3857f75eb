"""Quality gates run by scripts/test.sh that need more than one command line."""
