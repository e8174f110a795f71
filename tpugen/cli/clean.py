"""``tpugen clean``: remove what tpugen generated and cached under the build directory, and
nothing else (``sim.cache``: only folders tpugen marked as its own)."""

from tpugen.sim.cache import clean_build_root

__all__ = ["add_parser", "cmd_clean"]


def add_parser(sub):
    c = sub.add_parser("clean", help="remove what tpugen generated and cached under the build "
                                     "directory (build/ or $TPUGEN_BUILD_DIR)")
    c.set_defaults(func=cmd_clean)


def cmd_clean(args):
    removed, size, left = clean_build_root()
    for path in removed:
        print(f"removed {path}")
    for path in left:
        print(f"left {path}: not made by tpugen, or in use")
    print(f"tpugen clean: freed {size / 2**20:.1f} MB")
    return 0
