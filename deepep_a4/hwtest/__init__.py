"""`deepep-a4 hwtest`: the node installer rendered for a GPU machine that is not an A4 (command.py)."""
