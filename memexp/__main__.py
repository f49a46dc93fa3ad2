"""`python -m memexp <command>`: the command line lives in memexp.cli.main."""

import sys

from memexp.cli.main import main

if __name__ == "__main__":
    code = main()
    # Ctrl-C that landed inside code run by exec() on a string (dataclasses and namedtuples build
    # their methods that way, so any import can be it) leaves CPython's "unhandled
    # KeyboardInterrupt" flag set even though memexp handled it, and `python -m` then ends by
    # killing itself with SIGINT after printing our line (exit -2, not 130). The flag is reset by
    # the next exec of a string.
    exec("pass")
    sys.exit(code)
