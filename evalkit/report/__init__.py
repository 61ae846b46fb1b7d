"""Turning runs and history into output: JSON envelopes, rich tables, markdown and JUnit XML."""
