"""NoteBank-over-Plain latency and peak memory on a backbone (App. C.5 protocol).

    python scripts/bench/latency.py                                   # tiny backbone, 4K/16K/64K, RULER inputs
    python scripts/bench/latency.py inputs=synthetic                  # no essay data needed
    python scripts/bench/latency.py backbone=gdn lengths=4096,65536,1048576 bench.essay_path=PaulGrahamEssays.json

Arguments are those of `python -m memexp latency` (see memexp/run/latency.py).
"""

import sys

from memexp.cli.latency import main
from memexp.core.schema import ConfigError

if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ConfigError as e:
        print(f"latency: {e}", file=sys.stderr)
        sys.exit(2)
