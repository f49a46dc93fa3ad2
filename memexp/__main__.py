"""`python -m memexp <command>`: the command line lives in memexp.cli.main."""

import sys

from memexp.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
