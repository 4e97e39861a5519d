"""The jobs must run as Spark Connect clients (``spark.remote``): a Connect session has no RDD
API, no SparkContext and no py4j handles into the JVM. This scans the job's sources (the
``receval_spark`` package and ``jobs/``) for any use of them and lists every offender.

Only code is scanned: names in comments and docstrings are fine, attribute names written as
string literals (``getattr(df, "_jdf")``) are not. A line that is deliberately classic-only
and guarded (it must do nothing over Connect) says so with a ``# connect-ok: <why>`` comment.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from helpers import REPO

SCANNED = [REPO / "receval_spark", REPO / "jobs"]
PRAGMA = "connect-ok:"

# Anywhere in code: the JVM gateway and handles, the SparkContext, the RDD-based APIs.
FORBIDDEN_NAMES = {
    "_jvm": "py4j JVM gateway",
    "_jsc": "JavaSparkContext handle",
    "_jdf": "JVM DataFrame handle",
    "_jsparkSession": "JVM SparkSession handle",
    "_jconf": "JVM conf handle",
    "sparkContext": "SparkContext (absent over Connect)",
    "SparkContext": "SparkContext (absent over Connect)",
    "RDD": "RDD API",
    "mllib": "RDD-based pyspark.mllib",
}
# Only as an attribute (``x.rdd``, ``spark._sc``): plain variables may carry these names.
FORBIDDEN_ATTRIBUTES = {
    "rdd": "RDD API",
    "_sc": "SparkContext handle",
}


def _literal(source: str) -> object:
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return None  # an f-string


def _tokens(path: Path) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))


def _pragma_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT and PRAGMA in t.string}


def offenders(path: Path) -> list[str]:
    """``path:line: name (why)`` for each forbidden use in a Python source file."""
    tokens = _tokens(path)
    allowed = _pragma_lines(tokens)
    found = []
    previous = None
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        name = None
        if token.type == tokenize.NAME:
            attribute = previous == "." and token.string in FORBIDDEN_ATTRIBUTES
            if token.string in FORBIDDEN_NAMES or attribute:
                name = token.string
        elif token.type == tokenize.STRING:
            literal = _literal(token.string)
            if literal in FORBIDDEN_NAMES or literal in FORBIDDEN_ATTRIBUTES:
                name = literal  # getattr(obj, "_jdf") and the like
        if name is not None and token.start[0] not in allowed:
            why = FORBIDDEN_NAMES.get(name) or FORBIDDEN_ATTRIBUTES[name]
            found.append(f"{path}:{token.start[0]}: {name} ({why})")
        previous = token.string
    return found


def untracked_persists(path: Path) -> list[str]:
    """``.persist(`` / ``.cache(`` calls: a Connect server keeps what a client persisted after
    the client stops (and serves later runs from it), so the jobs persist only through
    receval_spark.cache.persist, which releases everything when the job ends."""
    if path.name == "cache.py" and path.parent.name == "receval_spark":
        return []
    tokens = [t for t in _tokens(path) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    return [
        f"{path}:{name.start[0]}: .{name.string}() (use receval_spark.cache.persist)"
        for dot, name, paren in zip(tokens, tokens[1:], tokens[2:], strict=False)
        if dot.string == "." and name.string in ("persist", "cache") and paren.string == "("
    ]


def sources() -> list[Path]:
    return sorted(p for root in SCANNED for p in root.rglob("*.py"))


def test_job_sources_use_no_rdd_sparkcontext_or_jvm_handles() -> None:
    files = sources()
    assert any(p.name == "pipeline.py" for p in files), files  # the scan sees the package
    found = [line for path in files for line in offenders(path)]
    assert not found, (
        "Spark Connect has no RDD API, SparkContext or JVM handles; use DataFrame APIs "
        f"instead (or mark a guarded classic-only line '# {PRAGMA} why'):\n" + "\n".join(found)
    )


def test_job_sources_persist_only_through_the_releasing_helper() -> None:
    found = [line for path in sources() for line in untracked_persists(path)]
    assert not found, "\n".join(found)


def test_the_scan_catches_real_uses_and_ignores_prose(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstrings may say sparkContext, .rdd and _jvm."""\n'
        "# comments too: df.rdd, spark._jsc\n"
        "rdd = 1  # a plain variable called rdd\n"
        "n = df.rdd.getNumPartitions()\n"
        "sc = spark.sparkContext\n"
        "jvm = spark._jvm\n"
        "plan = df._jdf.queryExecution()\n"
        "handle = getattr(spark, '_jsc')\n"
        "from pyspark import SparkContext\n"
        "from pyspark.mllib.evaluation import RankingMetrics\n"
        "jvm = getattr(spark, '_jvm', None)  # connect-ok: None over Connect\n"
        "df = df.persist()\n"
        "df = persist(df).cache ()\n",
        encoding="utf-8",
    )
    found = offenders(sample)
    assert [line.split(": ", 1)[1].split(" (")[0] for line in found] == [
        "rdd",
        "sparkContext",
        "_jvm",
        "_jdf",
        "_jsc",
        "SparkContext",
        "mllib",
    ], found
    assert [int(line.split(":")[1]) for line in found] == [4, 5, 6, 7, 8, 9, 10], found
    persists = untracked_persists(sample)
    assert [int(line.split(":")[1]) for line in persists] == [12, 13], persists
