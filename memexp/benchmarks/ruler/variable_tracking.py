"""Variable tracking (vt), as NVIDIA/RULER scripts/data/synthetic/variable_tracking.py
generates it with the noise haystack: chains "VAR B = VAR A " hidden among noise lines,
after one worked example (the ICL example, randomised per input)."""

from __future__ import annotations

import random
import string
from typing import Callable

from memexp.benchmarks.ruler.length import TooShort, largest_fitting
from memexp.benchmarks.ruler.sample import Sample
from memexp.benchmarks.ruler.tasks import VariableTrackingTask
from memexp.benchmarks.ruler.templates import NOISE, VARIABLE_TRACKING, split_prompt

ICL_LENGTH = 500  # tokens of the worked example, no generation budget (RULER's first pass)
ICL_VALUE = "12345"


def _value(rng: random.Random) -> str:
    # RULER draws it with numpy: np.random.randint(10000, 99999), upper bound excluded
    return str(rng.randrange(10000, 99999))


def _chains(rng: random.Random, num_chains: int, num_hops: int, icl: bool) -> tuple[list[list[str]], list[list[str]]]:
    k = 3 if icl else 5
    num_hops = min(10, num_hops) if icl else num_hops
    names = ["".join(rng.choices(string.ascii_uppercase, k=k)) for _ in range((num_hops + 1) * num_chains)]
    while len(set(names)) < num_chains * (num_hops + 1):
        names.append("".join(rng.choices(string.ascii_uppercase, k=k)))
    variables, chains = [], []
    for i in range(0, len(names), num_hops + 1):
        chain_vars = names[i : i + num_hops + 1]
        variables.append(chain_vars)
        chain = [f"VAR {chain_vars[0]} = {ICL_VALUE if icl else _value(rng)}"]
        chain += [f"VAR {chain_vars[j + 1]} = VAR {chain_vars[j]} " for j in range(num_hops)]
        chains.append(chain)
    return variables, chains


def _noise_with_chains(rng: random.Random, size: int, chains: list[list[str]]) -> tuple[str, list[int]]:
    """Noise lines with each chain's statements inserted in order at random lines, and
    the character offset of every statement (chain by chain)."""
    lines: list[str] = [NOISE] * size
    tags: list[int] = [-1] * size
    statement = 0
    for chain in chains:
        slots = sorted(rng.sample(range(len(lines)), len(chain)))
        for j, slot in enumerate(slots):
            lines.insert(slot + j, chain[j])
            tags.insert(slot + j, statement + j)
        statement += len(chain)
    offsets, position = [0] * statement, 0
    for line, tag in zip(lines, tags):
        if tag >= 0:
            offsets[tag] = position
        position += len(line) + 1
    # RULER's `.replace(". \n", ".\n")` matters only for its essay variant: no noise line or
    # statement ends in ". "
    return "\n".join(lines), offsets


def _randomize_icl(rng: random.Random, icl: str, num_hops: int) -> str:
    """RULER's randomize_icl: fresh names for the example's answer variables, fresh value."""
    for item in icl.strip().split()[-num_hops - 1 :]:
        icl = icl.replace(item, "".join(rng.choices(string.ascii_uppercase, k=len(item))))
    return icl.replace(ICL_VALUE, _value(rng))


class VariableTrackingGenerator:
    def __init__(
        self,
        spec: VariableTrackingTask,
        length: int,
        icl_tokens: Callable[[str], int],
        icl_rng: Callable[[], random.Random],
    ) -> None:
        """`icl_tokens` counts the tokens of a worked example; `icl_rng` gives the fresh
        random stream it is drawn from."""
        self.spec = spec
        self.incremental = 5 if length < 4096 else 10
        self.min_size = spec.num_hops + 1  # one noise line per statement of a chain
        self.max_size = None
        self.icl = self._worked_example(icl_tokens, icl_rng)

    def _text(self, rng: random.Random, size: int, icl: bool) -> tuple[str, str, list[list[str]], str, list[int]]:
        spec = self.spec
        variables, chains = _chains(rng, spec.num_chains, spec.num_hops, icl)
        value = chains[0][0].split("=")[-1].strip()
        haystack, offsets = _noise_with_chains(rng, size, chains)
        head, tail = split_prompt(VARIABLE_TRACKING.full, query=value, num_v=spec.num_hops + 1)
        return head + haystack, tail, variables, value, [len(head) + o for o in offsets]

    def _worked_example(self, icl_tokens: Callable[[str], int], icl_rng: Callable[[], random.Random]) -> str:
        """RULER's first pass: one input (answer prefix included) fitted to 500 tokens,
        followed by its answer."""

        def build(size: int) -> tuple[str, list[str]]:
            context, tail, variables, _, _ = self._text(icl_rng(), size, icl=True)
            return context + tail, variables[0]

        low = min(10, self.spec.num_hops) + 1
        try:
            size = largest_fitting(lambda n: icl_tokens(build(n)[0]), ICL_LENGTH, start=5, low=low)
        except TooShort:
            size = low  # RULER falls back to its smallest size when nothing fits
        text, answer = build(size)
        return text + " " + " ".join(answer) + "\n"

    def build(self, index: int, size: int, rng: random.Random) -> Sample:
        context, prompt, variables, value, offsets = self._text(rng, size, icl=False)
        icl = _randomize_icl(rng, self.icl, self.spec.num_hops)
        prefix = icl + "\n"
        meta = {
            "size": size,
            "value": value,
            "chains": variables,
            "statement_offsets": [len(prefix) + o for o in offsets],
        }
        return Sample(context=prefix + context, prompt=prompt, answers=variables[0], meta=meta)
