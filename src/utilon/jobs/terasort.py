"""TeraSort: sort 100-byte records by their 10-byte key, with a sampled range partitioner.

Real: the record layout and the algorithm are TeraGen's and TeraSort's.  Each record is a
10-byte random key and a 90-byte value (2 filler bytes, the row id as 32 hex digits, 4 filler
bytes, 48 bytes of letters, 4 filler bytes).  Before the run, keys sampled from the input
choose ``reduces - 1`` boundaries (``partitions.json``), so that reduce r gets the keys in
``[boundary r-1, boundary r)``.  Map task i reads only its own contiguous range of records
(memory-mapped) and writes the records of each reduce's key range, in input order, to
``shuffle/map-i/part-r.bin``; reduce task r concatenates its part of every map, sorts it by
key (stable) and writes ``output/part-r.bin``.
Assumed: keys are uniformly random bytes (TeraGen's are too), so the sample is small.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from utilon.jobs.common import guarded, output_path, read_json, rng, shuffle_path, write_json
from utilon.jobs.plan import TaskContext, Verification, atomic_write

RECORD = np.dtype([("key", "S10"), ("value", "V90")])  # S10 compares like memcmp
INPUT = Path("input") / "records.bin"
PARTITIONS = "partitions.json"
SAMPLE = 100_000  # keys sampled for the boundaries (TeraSort's default sample size)
CHUNK = 1 << 16  # records generated at a time


def make_records(first_row: int, keys: np.ndarray) -> np.ndarray:
    """Records ``first_row, first_row + 1, ...`` with the given ``(n, 10)`` uint8 keys."""
    n = len(keys)
    rows = np.arange(first_row, first_row + n, dtype=np.uint64)
    shifts = np.arange(31, -1, -1, dtype=np.uint64) * np.uint64(4)
    digits = (rows[:, None] >> shifts) & np.uint64(15)  # 32 hex digits, most significant first
    hexdig = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)[digits]
    letters = (ord("A") + (rows[:, None] + np.arange(48, dtype=np.uint64)) % 26).astype(np.uint8)
    out = np.empty((n, 100), dtype=np.uint8)
    out[:, :10] = keys
    out[:, 10:12] = (0x00, 0x11)
    out[:, 12:44] = hexdig
    out[:, 44:48] = (0x88, 0x99, 0xAA, 0xBB)
    out[:, 48:96] = letters
    out[:, 96:100] = (0xCC, 0xDD, 0xEE, 0xFF)
    return out


def prepare(job_dir: Path, seed: int, records: int, reduces: int) -> None:
    """Generate ``input/records.bin`` and the sampled partition boundaries."""
    gen = rng(seed, "teragen")
    path = job_dir / INPUT
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for first in range(0, records, CHUNK):
                n = min(CHUNK, records - first)
                keys = gen.integers(0, 256, (n, 10), dtype=np.uint8)
                f.write(make_records(first, keys).tobytes())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    data = np.memmap(path, dtype=RECORD, mode="r")
    picks = np.sort(rng(seed, "sample").choice(records, min(SAMPLE, records), replace=False))
    sample = np.sort(data["key"][picks])
    cuts = [sample[k * len(sample) // reduces] for k in range(1, reduces)]
    write_json(job_dir / PARTITIONS, [bytes(c).ljust(10, b"\0").hex() for c in cuts])


def boundaries(job_dir: Path) -> np.ndarray:
    return np.array([bytes.fromhex(h) for h in read_json(job_dir / PARTITIONS)], dtype="S10")


def record_range(records: int, maps: int, index: int) -> tuple[int, int]:
    return index * records // maps, (index + 1) * records // maps


def map_task(ctx: TaskContext) -> dict[str, Any]:
    reduces, records = int(ctx.args["reduces"]), int(ctx.args["records"])
    lo, hi = record_range(records, ctx.tasks, ctx.index)
    mm = np.memmap(ctx.job_dir / INPUT, dtype=RECORD, mode="r", offset=lo * RECORD.itemsize,
                   shape=(hi - lo,))
    part = np.searchsorted(boundaries(ctx.job_dir), mm["key"], side="right")
    order = np.argsort(part, kind="stable")  # group by reduce, keeping input order
    grouped = np.asarray(mm)[order]
    ends = np.cumsum(np.bincount(part, minlength=reduces))
    for r in range(reduces):
        start = ends[r - 1] if r else 0
        atomic_write(shuffle_path(ctx.job_dir, ctx.index, r, "bin"), grouped[start:ends[r]]
                     .tobytes())
    return {"records": hi - lo}


def reduce_task(ctx: TaskContext) -> dict[str, Any]:
    parts = [np.fromfile(shuffle_path(ctx.job_dir, m, ctx.index, "bin"), dtype=RECORD)
             for m in range(int(ctx.args["maps"]))]
    data = np.concatenate(parts)
    out = data[np.argsort(data["key"], kind="stable")]
    atomic_write(output_path(ctx.job_dir, f"part-{ctx.index:05d}.bin"), out.tobytes())
    return {"records": len(out)}


def read_output(job_dir: Path, reduces: int) -> list[np.ndarray]:
    return [np.fromfile(output_path(job_dir, f"part-{r:05d}.bin"), dtype=RECORD)
            for r in range(reduces)]


@guarded
def verify(job_dir: Path, records: int, reduces: int) -> Verification:
    """Counts, per-part order, key ranges, and the records themselves against a direct sort."""
    parts = read_output(job_dir, reduces)
    count = sum(len(p) for p in parts)
    if count != records:
        return Verification(False, f"output has {count} records, input {records}")
    cuts = boundaries(job_dir)
    for r, p in enumerate(parts):
        if np.any(p["key"][1:] < p["key"][:-1]):
            return Verification(False, f"part {r} is not sorted by key")
        if len(p) and np.any(np.searchsorted(cuts, p["key"], side="right") != r):
            return Verification(False, f"part {r} holds keys outside its range")
    keys = np.concatenate([p["key"] for p in parts])
    if np.any(keys[1:] < keys[:-1]):
        return Verification(False, "parts are not in key order")
    # Maps keep input order and reduces sort stably, so the output is exactly the input
    # sorted stably by key: byte equality also proves it is a permutation of the input.
    data = np.fromfile(job_dir / INPUT, dtype=RECORD)
    expected = data[np.argsort(data["key"], kind="stable")]
    if not np.array_equal(np.concatenate(parts).view(np.uint8), expected.view(np.uint8)):
        return Verification(False, "sorted output is not a permutation of the input records")
    return Verification(True, f"{count} records in {reduces} sorted, key-ordered parts; a "
                              "permutation of the input")
