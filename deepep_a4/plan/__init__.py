"""`deepep-a4 plan` and `cost`'s stack loading: the offline plan (command.py), the real program under Pulumi's mocks
(engine.py) and the provider classes it imports from their own modules (provider_imports.py)."""
