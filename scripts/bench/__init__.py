"""DeepEP benchmark runner, output parser and B200 baselines (stdlib only: these files run inside pods)."""
