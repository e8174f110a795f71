"""``python -m tpugen.cli``: the ``tpugen`` command line."""

import sys

from tpugen.cli import main

sys.exit(main())
