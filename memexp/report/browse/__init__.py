"""memexp browse: one self-contained HTML page over run folders (memexp.report.browse.page).

  python -m memexp browse [ROOT ...] [--where FIELD=VALUE ...] [--out DIR]

ROOTs are what `memexp report` reads (run, run-root or sweep folders). The page
(DIR/index.html, default outputs/browse under $MEMEXP_ROOT) opens from the file system; it
fetches nothing.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    from memexp.core.paths import under_root
    from memexp.report.browse.page import page
    from memexp.results.runs import find_runs

    p = argparse.ArgumentParser(prog="python -m memexp browse", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Example: python -m memexp browse outputs/runs --where method.name=notebank")
    p.add_argument("roots", nargs="*", default=["outputs/runs"], help="run, run-root or sweep folders")
    p.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                   help="only runs whose config field equals (or with !=, differs from) the value; repeatable")
    p.add_argument("--out", default="outputs/browse", help="the folder of index.html (default: %(default)s under "
                                                           "$MEMEXP_ROOT)")
    args = p.parse_args(argv)
    roots = [under_root(r) for r in args.roots]
    missing = [r for r in roots if not r.exists()]
    if missing:
        print(f"memexp: browse: {missing[0]}: no such folder", file=sys.stderr)
        return 2
    runs = find_runs(roots)
    if args.where:
        from memexp.report.query import where_runs

        runs = where_runs(runs, args.where, "browse")
        if runs is None:
            return 2
    if not runs:
        print(f"memexp: browse: no run folders under {', '.join(map(str, roots))}", file=sys.stderr)
        return 1
    out = under_root(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    path.write_text(page(runs, out), encoding="utf-8")
    print(f"[memexp browse] wrote {path} ({sum(len(r.records) for r in runs)} questions, {len(runs)} runs)")
    return 0
