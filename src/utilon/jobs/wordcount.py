"""Word count, Hadoop's canonical example: real map and reduce tasks over real text.

A word is a maximal run of ASCII letters, digits and apostrophes after ASCII lower-casing (the
regex ``[a-z0-9']+`` over the raw bytes); every other byte (space, punctuation, non-ASCII)
separates words.  Map task i counts the words of split i (so it is its own combiner) and
writes one shuffle file per reduce, ``shuffle/map-i/part-r.json``, holding the words whose
``zlib.crc32 % reduces`` is r.  Reduce task r merges part r of every map and writes
``output/part-r.tsv``: ``word<TAB>count`` lines sorted by word.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from utilon.jobs import textdata
from utilon.jobs.common import guarded, output_path, read_json, shuffle_path, write_json
from utilon.jobs.plan import TaskContext, Verification, atomic_write

WORD = re.compile(rb"[a-z0-9']+")


def count_words(blocks: Iterable[bytes]) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for block in blocks:
        counts.update(WORD.findall(block.lower()))
    return counts


def partition(word: str, reduces: int) -> int:
    return zlib.crc32(word.encode("ascii")) % reduces


def map_task(ctx: TaskContext) -> dict[str, Any]:
    reduces = int(ctx.args["reduces"])
    pieces = textdata.read_split(ctx.job_dir, ctx.index)
    counts = count_words(textdata.iter_blocks(ctx.job_dir, pieces))
    parts: list[dict[str, int]] = [{} for _ in range(reduces)]
    for word, n in counts.items():
        w = word.decode("ascii")  # the regex admits ASCII only
        parts[partition(w, reduces)][w] = n
    for r, part in enumerate(parts):  # every part, even empty: reduces expect all of them
        write_json(shuffle_path(ctx.job_dir, ctx.index, r, "json"), part)
    return {"bytes": sum(p.end - p.start for p in pieces), "words": counts.total(),
            "distinct": len(counts)}


def reduce_task(ctx: TaskContext) -> dict[str, Any]:
    maps = int(ctx.args["maps"])
    total: Counter[str] = Counter()
    for m in range(maps):
        total.update(read_json(shuffle_path(ctx.job_dir, m, ctx.index, "json")))
    atomic_write(output_path(ctx.job_dir, f"part-{ctx.index:05d}.tsv"),
                 "".join(f"{w}\t{n}\n" for w, n in sorted(total.items())))
    return {"distinct": len(total), "words": total.total()}


def read_output(job_dir: Path, reduces: int) -> list[list[tuple[str, int]]]:
    """The (word, count) rows of every output part, in file order."""
    parts = []
    for r in range(reduces):
        text = output_path(job_dir, f"part-{r:05d}.tsv").read_text(encoding="utf-8")
        rows = [line.split("\t") for line in text.splitlines()]
        parts.append([(w, int(n)) for w, n in rows])
    return parts


@guarded
def verify(job_dir: Path, reduces: int) -> Verification:
    """Recount the whole input directly and compare with the union of the output parts."""
    expected = {w.decode("ascii"): n for w, n in
                count_words(textdata.iter_blocks(job_dir, textdata.whole_input(job_dir))).items()}
    got: dict[str, int] = {}
    for r, rows in enumerate(read_output(job_dir, reduces)):
        words = [w for w, _ in rows]
        if words != sorted(set(words)):
            return Verification(False, f"part {r} is not sorted by word or repeats a word")
        for w, n in rows:
            if partition(w, reduces) != r:
                return Verification(False, f"word {w!r} is in part {r}, its hash says "
                                           f"{partition(w, reduces)}")
            got[w] = n
    if got != expected:
        bad = sorted(set(got) ^ set(expected) | {w for w in got if got[w] != expected.get(w)})
        return Verification(False, f"{len(bad)} word(s) differ from a direct count, e.g. "
                                   f"{bad[0]!r}: output {got.get(bad[0])}, "
                                   f"input {expected.get(bad[0])}")
    return Verification(True, f"{len(got)} distinct words, {sum(got.values())} in all, match a "
                              "direct count of the input")
