"""`python -m memexp lm-eval [lm-eval run arguments]`: lm-eval's CLI with `--model memexp` registered.

The command line is parsed by lm-eval's own parser (every `lm-eval run` option works); then
memexp validates `--model_args` (memexp.lmeval.config) before any model loads, fills in what
memexp needs (its run folder, `--log_samples`, an `--output_path` inside the run folder, and
`tokenizer=` for lm-eval's RULER tasks, the backbone's own) and runs lm-eval. Afterwards the
run folder gets memexp's records.jsonl and summary.json, scored by lm-eval's per-sample
metrics (memexp.lmeval.records), and the task x length table is printed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from memexp.core.schema import ConfigError


def _parse(argv: list[str]):
    from lm_eval._cli import HarnessCLI

    cli = HarnessCLI()
    saved = sys.argv
    sys.argv = ["lm-eval", "run", *argv]  # HarnessCLI.parse_args reads sys.argv
    try:
        return cli, cli.parse_args()
    finally:
        sys.argv = saved


def _data_tokenizer(cfg) -> str | None:
    """What lm-eval's RULER tasks load with AutoTokenizer to size their data: the backbone's tokenizer."""
    source = cfg.backbone.tokenizer or cfg.backbone.pretrained
    return None if source in (None, "byte") else source


def main(argv: list[str]) -> int:
    import importlib.util

    if importlib.util.find_spec("lm_eval") is None:
        raise ConfigError('python -m memexp lm-eval needs lm-evaluation-harness: pip install -e ".[lmeval]"')
    from memexp.core.paths import under_root
    from memexp.lmeval import NAME, register
    from memexp.lmeval.config import config_dict, load, run_dir
    from memexp.lmeval.quiet import quiet
    from memexp.lmeval.records import finish, read_results, read_samples
    from memexp.run.records import format_table

    quiet(under_root("outputs/cache/nltk_data"))
    register()
    cli, args = _parse(argv)
    if args.model not in (None, NAME):
        raise ConfigError(f"--model {args.model}: python -m memexp lm-eval evaluates --model {NAME} "
                          f"(use lm-eval itself for other models)")
    args.model = NAME
    model_args = args.model_args if isinstance(args.model_args, dict) else {}
    cfg, lm_args = load(model_args)  # a wrong value stops here, before any model loads
    lm_eval = {"tasks": args.tasks, "limit": args.limit, "num_fewshot": args.num_fewshot,
               "include_path": args.include_path, "metadata": args.metadata}
    folder = run_dir(cfg, lm_args, lm_eval)
    model_args.setdefault("run_dir", str(folder))
    if _data_tokenizer(cfg) is not None:
        model_args.setdefault("tokenizer", _data_tokenizer(cfg))
    args.model_args = model_args
    args.log_samples = True  # the per-sample scores memexp's records take
    args.output_path = args.output_path or str(folder / "lm_eval")
    start = time.time()
    cli.execute(args)
    samples = read_samples(Path(args.output_path), start)
    if not samples:
        print(f"memexp: lm-eval wrote no samples under {args.output_path}; no memexp records", file=sys.stderr)
        return 1
    summary = finish(folder, config_dict(cfg, lm_args, lm_eval), samples, read_results(Path(args.output_path), start))
    print(format_table(summary, f"lm-eval | {cfg.backbone.name} | {cfg.method.name}  ->  {folder}"))
    return 0
