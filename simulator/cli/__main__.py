"""``python -m simulator.cli ...``: the same as the ``servesim`` command."""
import sys

from simulator.cli.main import main

sys.exit(main())
