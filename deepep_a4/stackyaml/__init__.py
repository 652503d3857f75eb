"""How the Pulumi CLI's YAML library reads a stack file, where our reader (PyYAML) would read it otherwise."""
