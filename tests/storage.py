"""Where report tests write, and how a test looks at what is there without Spark: a local folder
(``file://``, and the folder a ``viewfs://`` mount points at) or a prefix of a bucket on an
S3-API server on 127.0.0.1 (``s3a://``): moto's server, a real HTTP server on loopback, one per
test process (tests/conftest.py ``s3_server``). Jobs reach the bucket through Spark and the
hadoop-aws jars (tests/hadoop_aws.py); only the tests use boto3, to look inside it."""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# static credentials of the local test server; nothing else accepts them
ACCESS_KEY, SECRET_KEY, REGION = "receval-test", "receval-test-secret", "us-east-1"
BUCKET = "receval-lake"


def storages(*names: str) -> list[Any]:
    """``report_root`` parameters for these storages (file, viewfs, s3a), each but file with
    its marker (slow tier)."""
    return [
        name if name == "file" else pytest.param(name, marks=getattr(pytest.mark, name), id=name)
        for name in names
    ]


@dataclass(frozen=True)
class LocalFolder:
    """A local folder's files, by path relative to it."""

    path: Path

    def names(self, prefix: str = "") -> list[str]:
        """Files whose relative path starts with ``prefix``: the folder of the prefix walked
        (os.walk skips folders that vanish meanwhile, as a running job's temporary ones do)."""
        top = self.path / prefix.rpartition("/")[0]
        return sorted(
            name
            for folder, _, files in os.walk(top)
            for name in (str((Path(folder) / f).relative_to(self.path)) for f in files)
            if name.startswith(prefix)
        )

    def read(self, name: str) -> bytes:
        return (self.path / name).read_bytes()


@dataclass(frozen=True)
class BucketFolder:
    """The objects under ``prefix`` of a bucket, by key relative to it (no directory markers)."""

    client: Any
    bucket: str
    prefix: str

    def names(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.prefix}/{prefix}"
        )
        keys = [o["Key"] for page in pages for o in page.get("Contents", ())]
        return sorted(k.removeprefix(f"{self.prefix}/") for k in keys if not k.endswith("/"))

    def read(self, name: str) -> bytes:
        body = self.client.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{name}")["Body"]
        return bytes(body.read())


@dataclass(frozen=True)
class ReportRoot:
    """An output root for report tests: the URI jobs write to, where its files are
    (``storage``), and the Spark settings a job in its own process needs to reach it
    (``conf``: for a job's ``spark.conf``; the tests' own session has them)."""

    uri: str
    storage: LocalFolder | BucketFolder
    conf: Mapping[str, str] = field(default_factory=dict)

    def files(self, pattern: str = "") -> dict[str, bytes]:
        """Path (relative to the root) -> content of every file whose path matches the glob
        ``pattern`` (``*`` within a folder, ``**`` across folders; all files without one)."""
        literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        match = glob_regex(pattern) if pattern else None
        return {
            name: self.storage.read(name)
            for name in self.storage.names(literal)
            if match is None or match.fullmatch(name)
        }

    def data_files(self, folder: str) -> list[str]:
        """The Parquet files under ``folder`` that a reader would open (not _SUCCESS, .crc)."""
        return [
            name
            for name in self.storage.names(f"{folder.rstrip('/')}/")
            if name.endswith(".parquet") and not name.rsplit("/", 1)[-1].startswith((".", "_"))
        ]

    def names(self, prefix: str = "") -> list[str]:
        return self.storage.names(prefix)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regular expression: ``**/`` any folders (or none), a final ``**``
    anything, ``*`` any name."""
    out = []
    for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
        regex = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part)
        out.append(regex or re.escape(part))
    return re.compile("".join(out))


class S3Server:
    """moto's S3 server on 127.0.0.1 (a free port), one bucket, static credentials; it counts
    the requests it answers by method (``requests``; werkzeug's access log, kept quiet)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.requests: Counter[str] = Counter()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._counter = _RequestCounter(self.requests)

    def start(self) -> S3Server:
        access = logging.getLogger("werkzeug")
        access.addHandler(self._counter)
        access.setLevel(logging.INFO)
        access.propagate = False
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.client = self._client()
        self.client.create_bucket(Bucket=BUCKET)
        return self

    def stop(self) -> None:
        self._server.stop()
        logging.getLogger("werkzeug").removeHandler(self._counter)

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def spark_conf(self, jars: Sequence[Path]) -> dict[str, str]:
        """The settings that give a Spark session ``s3a://`` on this server: the jars on the
        driver's class path (a local Spark's executors share it), where ``spark.jars`` would
        copy them into every JVM's temporary folder (686 MB; ``local:`` jars too)."""
        return {"spark.driver.extraClassPath": os.pathsep.join(map(str, jars))} | {
            f"spark.hadoop.fs.s3a.{key}": value for key, value in self.s3a_settings().items()
        }

    def s3a_settings(self) -> dict[str, str]:
        return {
            "endpoint": self.endpoint,
            "endpoint.region": REGION,
            "path.style.access": "true",
            "connection.ssl.enabled": "false",
            "access.key": ACCESS_KEY,
            "secret.key": SECRET_KEY,
            "aws.credentials.provider": ("org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"),
            # a failure against a loopback server is a failure: no minutes of retries
            "attempts.maximum": "2",
            "retry.limit": "2",
        }

    def folder(self, name: str) -> BucketFolder:
        return BucketFolder(self.client, BUCKET, name)


class _RequestCounter(logging.Handler):
    """Counts werkzeug's access-log lines (``"GET /bucket/key HTTP/1.1" 200 -``) by method."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r'"([A-Z]+) /', record.getMessage())
        if found:
            self.counts[found.group(1)] += 1
