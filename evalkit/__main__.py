"""``python -m evalkit``."""

from evalkit.cli import main

main()
