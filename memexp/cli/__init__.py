"""The command line: the Hydra app (`memexp run`), its help, and every subcommand."""
