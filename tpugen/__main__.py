"""``python -m tpugen``: the ``tpugen`` command line."""

import sys

from .cli import main

sys.exit(main())
