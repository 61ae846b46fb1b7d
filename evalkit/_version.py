"""The evalkit version (read by hatch at build time, stored with every run)."""

__version__ = "0.1.0"
