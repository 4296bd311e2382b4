"""Helpers the job kinds share: seeded generators, file layout, deterministic JSON and .npz.

Everything a task writes goes through ``atomic_write`` and is a pure function of the job's
input, so a re-run task (attempt 2, 3, ...) rewrites byte-identical files.
"""

from __future__ import annotations

import functools
import io
import json
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from utilon.jobs.plan import Verification, atomic_write

TASK_OVERHEAD_S = 0.05
"""Prior seconds every task costs besides its work (handing it to a worker, imports, opening
files): an assumed allowance, not a measurement; the scheduler learns the real cost."""


def rng(seed: int, stream: str) -> np.random.Generator:
    """A generator for one purpose of one seed; streams are independent of each other, so
    drawing more in one place never shifts what another place draws."""
    return np.random.default_rng([seed % 2**64, zlib.crc32(stream.encode())])


def shuffle_path(job_dir: Path, map_index: int, part: int, ext: str) -> Path:
    return job_dir / "shuffle" / f"map-{map_index:05d}" / f"part-{part:05d}.{ext}"


def output_path(job_dir: Path, name: str) -> Path:
    return job_dir / "output" / name


def write_json(path: Path, obj: Any) -> None:
    # sorted keys and fixed separators: the same data always gives the same bytes
    atomic_write(path, json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Like ``np.savez`` but byte-reproducible: ``np.savez`` stamps the current time into the
    zip entries, which would make same-seed inputs and re-run outputs differ."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
    atomic_write(path, buf.getvalue())


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def guarded(verify: Callable[..., Verification]) -> Callable[..., Verification]:
    """A verifier that reports missing or unreadable output as a failed check, not a crash."""

    @functools.wraps(verify)
    def wrapper(*args: Any, **kwargs: Any) -> Verification:
        try:
            return verify(*args, **kwargs)
        except (OSError, ValueError, KeyError) as e:
            return Verification(ok=False, detail=f"cannot read output: {type(e).__name__}: {e}")

    return wrapper
