"""spark-submit entry point: ``spark-submit jobs/sessions.py --config FILE [--set KEY=VALUE ...]``.

Uses the session spark-submit provides (its master is never overridden).
"""

import sys

from receval_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["sessions", *sys.argv[1:]]))
