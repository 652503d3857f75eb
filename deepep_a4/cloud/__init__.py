"""Reads of the user's Google Cloud project through Google's client libraries, shared by the commands."""
