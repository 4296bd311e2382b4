"""Grep, Hadoop's example of the same name: count every distinct match of a regex.

Like Hadoop's RegexMapper, the pattern is applied to each line separately (lines are split on
``\\n``, a trailing ``\\r`` dropped, undecodable UTF-8 replaced) and the whole match (group 0)
is counted, empty matches included.  Map task i writes its counts to
``shuffle/map-i/part-00000.json``; the one reduce task merges them into
``output/matches.tsv``: ``count<TAB>match`` lines, by count descending then match.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from utilon.jobs import textdata
from utilon.jobs.common import guarded, output_path, read_json, shuffle_path, write_json
from utilon.jobs.plan import TaskContext, Verification, atomic_write

OUTPUT = "matches.tsv"


def count_matches(lines: Iterable[str], regex: re.Pattern[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(m.group(0) for m in regex.finditer(line))
    return counts


def map_task(ctx: TaskContext) -> dict[str, Any]:
    regex = re.compile(ctx.args["pattern"])
    pieces = textdata.read_split(ctx.job_dir, ctx.index)
    counts = count_matches(textdata.iter_lines(textdata.iter_blocks(ctx.job_dir, pieces)), regex)
    write_json(shuffle_path(ctx.job_dir, ctx.index, 0, "json"), dict(counts))
    return {"bytes": sum(p.end - p.start for p in pieces), "matches": counts.total()}


def ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def reduce_task(ctx: TaskContext) -> dict[str, Any]:
    total: Counter[str] = Counter()
    for m in range(int(ctx.args["maps"])):
        total.update(read_json(shuffle_path(ctx.job_dir, m, 0, "json")))
    atomic_write(output_path(ctx.job_dir, OUTPUT),
                 "".join(f"{n}\t{match}\n" for match, n in ranked(total)))
    return {"distinct": len(total), "matches": total.total()}


def read_output(job_dir: Path) -> list[tuple[str, int]]:
    """The (match, count) rows of the output, in file order."""
    text = output_path(job_dir, OUTPUT).read_bytes().decode("utf-8")
    rows = [line.split("\t", 1) for line in text.split("\n")[:-1]]  # a match may hold a tab
    return [(match, int(n)) for n, match in rows]


@guarded
def verify(job_dir: Path, pattern: str) -> Verification:
    """Count the matches over the whole input with ``re.finditer`` and compare."""
    lines = textdata.iter_lines(textdata.iter_blocks(job_dir, textdata.whole_input(job_dir)))
    expected = ranked(count_matches(lines, re.compile(pattern)))
    got = read_output(job_dir)
    if got != expected:
        i = next(i for i, (a, b) in enumerate(itertools.zip_longest(got, expected)) if a != b)
        return Verification(False, f"output row {i} is {_row(got, i)}; a direct count of the "
                                   f"input gives {_row(expected, i)}")
    return Verification(True, f"{len(got)} distinct matches, {sum(n for _, n in got)} in all, "
                              "match a direct count of the input")


def _row(rows: list[tuple[str, int]], i: int) -> str:
    return f"{rows[i][1]} x {rows[i][0]!r}" if i < len(rows) else "no row"
