"""The node's software: the installer it runs, the pins of what it downloads, the staged parts, the store."""
