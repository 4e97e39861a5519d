"""``python -m receval_spark``: the same command line as ``receval``."""

import sys

from receval_spark.cli import main

sys.exit(main())
