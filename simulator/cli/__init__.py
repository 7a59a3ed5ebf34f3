"""The command line: ``servesim`` and every subcommand."""
