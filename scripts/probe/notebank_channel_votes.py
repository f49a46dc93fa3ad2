"""Which channels of a backbone route a question to its needle's note? NoteBank's native router,
one channel at a time.

For each RULER question it reads the context with NoteBank (full-query addresses, the run's
`method.layers`), probes the question and lets every channel vote (Eq. 5). A note is "right"
when it contains a reference answer (the oracle router's test). It prints each channel's share
of questions whose vote went to a right note, and how often the two most-voted notes include
one: with the full queries, and with `--draws` random 16-of-d_k coordinate selections (the
paper's compaction, App. B.3), votes recomputed from the same notes and queries.

    python scripts/probe/notebank_channel_votes.py bench.seed=7 method.layers=null
    python scripts/probe/notebank_channel_votes.py bench.seed=8 "method.layers=[1,2,3]"
    python scripts/probe/notebank_channel_votes.py bench.seed=8 "method.layers=[1,2,3]" "bench.tasks=[niah_single_2]" --matches

Arguments are `memexp run` overrides over experiment=tiny_gdn_words_lengths method=notebank at
16K tokens, 5 examples per task (override any of them). Run it on validation seeds, never on the
seeds a table reports.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
import torch.nn.functional as F

from memexp.backbones import load_backbone
from memexp.benchmarks import build_benchmark
from memexp.core.compose import load_config
from memexp.kernels import routing
from memexp.methods import build_method
from memexp.methods.notebank.router import top_r

BASE = ["experiment=tiny_gdn_words_lengths", "method=notebank", "bench.lengths=[16384]", "bench.num_samples=5"]


def votes_hit(addresses: torch.Tensor, queries: torch.Tensor, right: torch.Tensor, budget: int) -> tuple[torch.Tensor, bool]:
    """([J] bool: channel j voted for a right note, whether the `budget` most-voted notes hold one).
    addresses [N, J, d], queries [Tq, J, d]: the native router's own vote and top-R."""
    votes, best, _ = routing.route_votes(addresses, queries)
    return right[best.cpu()], bool(right[top_r(votes, budget)].any())


def best_question_tokens(addresses: torch.Tensor, queries: torch.Tensor) -> tuple[list[int], list[int]]:
    """(each channel's voted note, the question position whose query matched it best)."""
    sims = torch.einsum("ncd,tcd->cnt", F.normalize(addresses, dim=-1), F.normalize(queries, dim=-1))
    _, best, _ = routing.route_votes(addresses, queries)
    return best.tolist(), [int(sims[j, n].argmax()) for j, n in enumerate(best.tolist())]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Overrides and options in any order (`bench.seed=8 --draws 0 "method.layers=[0]"`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--draws", type=int, default=3, help="random coordinate selections to compare")
    parser.add_argument("--coordinates", type=int, default=16)
    parser.add_argument("--matches", action="store_true",
                        help="for each task's first question: each channel's note and best-matching question token")
    # plain parse_args stops taking positionals at the first option: overrides after --draws were refused
    return parser.parse_intermixed_args(argv)


def main() -> None:
    args = parse()
    torch.set_num_threads(2)
    cfg = load_config(BASE + ["method.address_dim=null"] + args.overrides)
    backbone = load_backbone(cfg.backbone)
    method = build_method(cfg.method)
    method.prepare(backbone)
    channels = method.addressing(backbone)[0].channels
    generator = torch.Generator().manual_seed(0)
    draws = [torch.stack([torch.randperm(ch.d_k, generator=generator)[: args.coordinates] for ch in channels])
             for _ in range(args.draws)]
    channel_hits = torch.zeros(len(channels))
    top = defaultdict(int)  # "full" or draw index -> questions whose replayed notes hold a right one
    by_task: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    asked = 0
    for example in build_benchmark(cfg.bench).examples(backbone.tokenizer):
        memory = method.read(backbone, backbone.tokenizer.encode(example.context))
        archive = memory.extra
        texts = archive.texts(backbone.tokenizer)
        for question in example.questions:
            right = torch.tensor([any(ref in t for ref in question.references) for t in texts])
            if not right.any():
                continue  # no note holds an answer: no router can succeed
            asked += 1
            queries = method._probe(backbone, memory, backbone.tokenizer.encode(question.prompt)).cpu()
            addresses = archive.addresses.float().cpu()
            hits, found = votes_hit(addresses, queries, right, cfg.method.replay_budget)
            if args.matches and by_task[example.task][1] == 0:
                question_ids = backbone.tokenizer.encode(question.prompt)
                print(f"{example.task} {question.id}: notes holding an answer {right.nonzero().flatten().tolist()}")
                for ch, note, position in zip(channels, *best_question_tokens(addresses, queries)):
                    token = backbone.tokenizer.decode([question_ids[position]])
                    print(f"  ({ch.layer}, {ch.head}) -> note {note}{' (right)' if right[note] else ''}, "
                          f"question token {token!r}")
            channel_hits += hits.float()
            top["full"] += found
            by_task[example.task][0] += found
            by_task[example.task][1] += 1
            for d, index in enumerate(draws):
                rows = torch.arange(len(channels))[:, None]
                _, found = votes_hit(addresses[:, rows, index], queries[:, rows, index], right, cfg.method.replay_budget)
                top[d] += found
    print(f"questions with a note holding an answer: {asked}; layers {cfg.method.layers or 'all'}")
    print("channel (layer, head): share of questions its vote went to a right note")
    for ch, hits in zip(channels, channel_hits.tolist()):
        print(f"  ({ch.layer}, {ch.head}): {hits / asked:.2f}")
    print(f"top-{cfg.method.replay_budget} holds a right note, full queries: {top['full']} / {asked}")
    for d in range(args.draws):
        print(f"  {args.coordinates} random coordinates, draw {d}: {top[d]} / {asked}")
    print("by task (full queries): " + ", ".join(f"{t} {h}/{n}" for t, (h, n) in sorted(by_task.items())))


if __name__ == "__main__":
    main()
