"""Subtrees a query computes more than once, from a Spark event log (how issue 50's second
session found its cuts).

Under adaptive execution every shuffle and every broadcast is a Spark job of its own, so a
DataFrame read twice inside one plan (a self-join, a union of two selects of it, a small table
broadcast in two places) is a second set of jobs unless it is persisted. For the SQL executions
with the most jobs this prints each repeated subtree of at least ``--min-nodes`` operators (the
largest first, each once), with how often it appears and the tables it scans:

    .venv/bin/python benchmarks/job_profile.py --config conf/movielens-100k.yaml --sites ...
    .venv/bin/python benchmarks/plan_repeats.py /tmp/receval-profile-*/events/local-*

(``job_profile.py`` leaves its event log in the temporary folder it prints nothing about:
the newest ``/tmp/receval-profile-*``.)
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NODE = re.compile(r"^([\s:|+-]*?)(\w[\w ]*?) \((\d+)\)")
DETAIL = re.compile(r"\n\((\d+)\) ([^\n]*)\n((?:[^\n(][^\n]*\n)*)")


@dataclass
class Plan:
    """One physical plan's operator tree: (depth, name, id) per line and children by index."""

    nodes: list[tuple[int, str, int]]
    details: dict[int, str]
    children: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def parse(cls, description: str) -> Plan:
        tree, _, _ = description.partition("\n\n(1)")
        nodes = []
        for line in tree.splitlines()[2:]:
            match = NODE.match(line)
            if match:
                nodes.append((len(match.group(1)), match.group(2), int(match.group(3))))
        details = {
            int(m.group(1)): m.group(2) + " " + m.group(3).replace("\n", " ")
            for m in DETAIL.finditer(description)
        }
        plan = cls(nodes, details)
        stack: list[int] = []
        for index, (depth, _, _) in enumerate(nodes):
            while stack and nodes[stack[-1]][0] >= depth:
                stack.pop()
            if stack:
                plan.children[stack[-1]].append(index)
            stack.append(index)
        return plan

    def signatures(self) -> tuple[dict[int, str], dict[int, int]]:
        """Each node's subtree as a string of operator names, and its size in operators."""
        shape: dict[int, str] = {}
        size: dict[int, int] = {}
        for index in reversed(range(len(self.nodes))):  # children come after their parent
            kids = self.children[index]
            shape[index] = f"{self.nodes[index][1]}({','.join(shape[k] for k in kids)})"
            size[index] = 1 + sum(size[k] for k in kids)
        return shape, size

    def scans(self, index: int, size: int) -> list[str]:
        """The first few lines of the scans under node ``index`` (its subtree: ``size`` lines)."""
        found = [
            self.details.get(self.nodes[i][2], "")[:100]
            for i in range(index, index + size)
            if self.nodes[i][1].startswith("Scan")
        ]
        return found[:3]


def repeats(plan: Plan, *, min_nodes: int) -> list[tuple[int, int, str, list[str]]]:
    """(times, size, top operator, scans) of the repeated subtrees, largest first; a subtree
    inside a larger repeated one is left out."""
    shape, size = plan.signatures()
    counts = Counter(shape[i] for i in shape if size[i] >= min_nodes)
    seen: set[str] = set()
    inside: set[int] = set()
    found = []
    for index in range(len(plan.nodes)):
        if index in inside or size[index] < min_nodes or counts[shape[index]] < 2:
            continue
        inside.update(range(index, index + size[index]))
        if shape[index] in seen:
            continue
        seen.add(shape[index])
        name = plan.nodes[index][1]
        found.append((counts[shape[index]], size[index], name, plan.scans(index, size[index])))
    return found


def executions(path: Path) -> tuple[dict[int, dict[str, Any]], Counter[int]]:
    """The SQL executions of an event log by id, and the jobs each submitted."""
    started: dict[int, dict[str, Any]] = {}
    jobs: Counter[int] = Counter()
    with path.open() as log:
        for line in log:
            event = json.loads(line)
            kind = event["Event"]
            if kind.endswith("SparkListenerSQLExecutionStart"):
                started[event["executionId"]] = event
            elif kind == "SparkListenerJobStart":
                execution = event.get("Properties", {}).get("spark.sql.execution.id")
                if execution is not None:
                    jobs[int(execution)] += 1
    return started, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="an uncompressed Spark event log file")
    parser.add_argument("--top", type=int, default=8, help="executions with the most jobs")
    parser.add_argument("--min-nodes", type=int, default=6)
    args = parser.parse_args()
    started, jobs = executions(args.log)
    for execution, n in jobs.most_common(args.top):
        event = started[execution]
        plan = Plan.parse(event["physicalPlanDescription"])
        broadcasts = sum(1 for _, name, _ in plan.nodes if name == "BroadcastExchange")
        print(
            f"execution {execution} ({event['description'][-40:]}): {n} jobs, "
            f"{len(plan.nodes)} operators, {broadcasts} broadcasts"
        )
        for times, size, name, scans in repeats(plan, min_nodes=args.min_nodes):
            print(f"  x{times}  {size:4d} operators under {name}; scans: {scans}")


if __name__ == "__main__":
    main()
