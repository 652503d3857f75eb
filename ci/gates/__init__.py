"""Quality gates run by ci/test.sh that need more than one command line."""
