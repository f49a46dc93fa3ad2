"""How many RULER UUIDs a copy keyed on the n tokens before each position cannot follow.

niah_single_3's value is a version-4 UUID (RULER's generator, memexp.benchmarks.ruler.vocabulary).
Under a word tokenizer it is ~26 pieces: digit groups, hex letters, "-". A copy layer that reads
"what followed the last n tokens" (induction, recipe field `induction_context`) is ambiguous on a
UUID where some n-token context is followed by two different tokens inside it. This prints that
share for n = 1, 2, 3 with the shipped tiny_gdn_words tokenizer (or --tokenizer):

    python scripts/probe/uuid_copy_ambiguity.py [--samples 2000] [--seed 1] [--tokenizer path/tokenizer.json]
"""

from __future__ import annotations

import argparse
import random

from memexp.benchmarks.ruler.vocabulary import random_uuid
from memexp.core.schema import ASSETS_DIR


def ambiguous(tokens: list[str], n: int) -> bool:
    """Some n-token context in `tokens` is followed by two different tokens."""
    follows: dict[tuple[str, ...], str] = {}
    for i in range(n, len(tokens)):
        context = tuple(tokens[i - n : i])
        if follows.setdefault(context, tokens[i]) != tokens[i]:
            return True
    return False


def main() -> None:
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tokenizer", default=str(ASSETS_DIR / "tiny_gdn_words" / "tokenizer.json"))
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(args.tokenizer)
    rng = random.Random(args.seed)
    # the value as it follows "is:" in the needle sentence, with its leading space
    uuids = [tokenizer.encode(" " + random_uuid(rng)).tokens for _ in range(args.samples)]
    print(f"{args.samples} UUIDs, {sum(map(len, uuids)) / len(uuids):.1f} tokens each on average")
    for n in (1, 2, 3):
        share = sum(ambiguous(t, n) for t in uuids) / len(uuids)
        print(f"keyed on {n} token(s): {100 * share:.1f} % of UUIDs have a context followed by two different tokens")


if __name__ == "__main__":
    main()
