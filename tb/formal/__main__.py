"""``python -m tpugen.tb.formal [--all] [NAME ...]``: run formal checks and print a Markdown
table (name, module, sizes, mode, depth, verdict, seconds). The default suite's checks by
default; ``--all`` every one; names pick some."""

import sys

from tpugen.tb.formal.catalog import CHECKS, check, run_check


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    chosen = ([check(n) for n in names] if names
              else [c for c in CHECKS if c.fast or "--all" in argv])
    print("| check | module | sizes | mode | depth | expected | result | time (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    wrong = 0
    for c in chosen:
        r = run_check(c)
        wrong += r.status != c.expect
        print(f"| {c.name} | {c.module} | {c.sizes} | {c.mode} | {c.depth} | {c.expect} | "
              f"{r.status} | {r.seconds:.1f} |", flush=True)
        if r.status != c.expect:
            print(f"  {r.summary}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
