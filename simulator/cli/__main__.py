"""``python -m simulator.cli ...``: the same as the ``servesim`` command."""
from simulator.cli.main import console

console()
