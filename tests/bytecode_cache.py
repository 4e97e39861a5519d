"""Python's bytecode cache for every process of the test run, imported by the conftests first.

With ``PYTHONDONTWRITEBYTECODE`` set (some machines set it for every shell, this project's
among them) and a virtual environment installed without bytecode (uv's default), every Python
process compiles each module it imports from source: pyspark, pandas, numpy, matplotlib and
the package, about 1,500 files and 8 CPU seconds per job process on a 2-core machine. A test
run starts hundreds of Python processes (the jobs it runs as processes, Spark's Python
workers, notebook kernels, the lake suite's session), so the tests let Python write its cache
(``__pycache__``, git-ignored): the first process that imports a module compiles it, the
others read it. It does not change what runs (Python checks each cached file against its
source's time and size). Measured in benchmarks/README.md ("Issue 51, sixth session")."""

from __future__ import annotations

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the processes the tests start, and theirs
sys.dont_write_bytecode = False  # this process
