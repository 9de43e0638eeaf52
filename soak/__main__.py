"""``python -m soak``: see ``soak.cli``."""

from soak.cli import main

main()
