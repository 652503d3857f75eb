"""Models of the Pulumi engine's own steps that the workstation commands imitate (config pipeline, yaml.v3)."""
