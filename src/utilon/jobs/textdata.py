"""Text input for word count and grep: a generated corpus or the user's files, cut into splits.

Real: the user's files are read as they are; cutting them into ``maps`` splits reads only a few
bytes near each cut to move it to the next line start (what Hadoop's FileInputFormat and
LineRecordReader achieve together), and a map task streams only its own byte range.  A
directory contributes its regular files, not sub-directories, sorted by name, skipping names
starting with ``.`` or ``_`` (Hadoop's hidden-file rule); the files are cut as one stream, so a
split may span the end of one file and the start of the next.

Assumed: the generated corpus is synthetic.  Its words are random lowercase letter strings
(2-10 letters, shorter words more frequent), drawn with Zipf frequencies (rank k with
probability proportional to 1/k), about 10 words a line, each line capitalised and ending in a
full stop.  Sizes are decimal megabytes (10**6 bytes).  The same seed and parameters always
give the same bytes.
"""

from __future__ import annotations

import bisect
import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from utilon.jobs.common import read_json, rng, write_json

CORPUS = Path("input") / "corpus.txt"
SPLITS = "splits.json"
ZIPF_S = 1.0  # exponent of the word-frequency law; 1 is the classic value for English
MEAN_WORDS_PER_LINE = 10
MIN_GENERATED_SPLIT = 1024  # bytes per map of generated text: far above any generated line
BLOCK = 1 << 20  # bytes a map reads at a time
LINES_PER_CHUNK = 4096  # generated lines per write


@dataclass(frozen=True)
class Piece:
    """A byte range ``[start, end)`` of one file; both ends lie on line starts or file ends."""

    path: str  # relative to the job directory when inside it, else absolute
    start: int
    end: int


# -- generated corpus ------------------------------------------------------------------------
def make_vocabulary(gen: np.random.Generator, size: int) -> list[bytes]:
    """``size`` distinct random words, shortest first so that the most frequent are short."""
    words: dict[bytes, None] = {}
    while len(words) < size:
        n = size - len(words)
        lengths = gen.integers(2, 11, n)
        letters = gen.integers(ord("a"), ord("z") + 1, (n, 10), dtype=np.uint8)
        for row, length in zip(letters, lengths, strict=True):
            words.setdefault(row[:length].tobytes())
    return sorted(words, key=len)


def generate_corpus(path: Path, seed: int, megabytes: float, vocabulary: int) -> int:
    """Write about ``megabytes`` MB of text (whole lines) to ``path``; return its size."""
    gen = rng(seed, "corpus")
    vocab = make_vocabulary(gen, vocabulary)
    plain = np.array(vocab, dtype=object)
    capital = np.array([w.capitalize() for w in vocab], dtype=object)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** ZIPF_S
    probs = weights / weights.sum()
    target = max(1, round(megabytes * 1e6))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    written = 0
    try:
        with os.fdopen(fd, "wb") as f:
            while written < target:
                chunk = _lines(gen, plain, capital, probs)
                if written + len(chunk) >= target:  # stop at the first line end past the target
                    chunk = chunk[: chunk.index(b"\n", target - written - 1) + 1]
                f.write(chunk)
                written += len(chunk)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


def _lines(gen: np.random.Generator, plain: np.ndarray, capital: np.ndarray,
           probs: np.ndarray) -> bytes:
    per_line = 1 + gen.poisson(MEAN_WORDS_PER_LINE - 1, LINES_PER_CHUNK)
    idx = gen.choice(len(plain), size=int(per_line.sum()), p=probs)
    ends = np.cumsum(per_line) - 1
    starts = ends - per_line + 1
    words = plain[idx]
    words[starts] = capital[idx[starts]]
    seps = np.full(len(idx), b" ", dtype=object)
    seps[ends] = b".\n"
    tokens = np.empty(2 * len(idx), dtype=object)
    tokens[0::2] = words
    tokens[1::2] = seps
    return b"".join(tokens.tolist())


# -- the user's input ------------------------------------------------------------------------
def input_files(path: Path) -> list[Path]:
    """The non-empty files that make up ``path``; ValueError (naming ``input``) if none."""
    if not path.exists():
        raise ValueError(f"input: {path} does not exist; give an existing text file or "
                         "directory (relative to the scenario file), or omit input to "
                         "generate text")
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and not p.name.startswith((".", "_")))
    else:
        files = [path]
    files = [p for p in files if p.stat().st_size > 0]
    if not files:
        raise ValueError(f"input: {path} is empty (no non-empty text file); give a file or "
                         "directory with text, or omit input to generate text")
    return files


def compute_splits(files: list[Path], maps: int) -> list[list[Piece]]:
    """Cut the files, as one stream, into ``maps`` non-empty ranges that start on lines."""
    sizes = [p.stat().st_size for p in files]
    offsets = list(itertools.accumulate(sizes, initial=0))  # global offset of each file
    total = offsets[-1]
    cuts = [0]
    for k in range(1, maps):
        cuts.append(max(cuts[-1], _line_start(files, offsets, k * total // maps)))
    cuts.append(total)
    if any(a == b for a, b in itertools.pairwise(cuts)):
        raise ValueError(f"maps: cannot cut {total} bytes of input into {maps} non-empty "
                         "line-aligned splits (too few lines); lower maps")
    splits = []
    for a, b in itertools.pairwise(cuts):
        pieces = []
        for i, p in enumerate(files):
            lo, hi = max(a, offsets[i]), min(b, offsets[i + 1])
            if lo < hi:
                pieces.append(Piece(str(p), lo - offsets[i], hi - offsets[i]))
        splits.append(pieces)
    return splits


def _line_start(files: list[Path], offsets: list[int], pos: int) -> int:
    """The first global offset >= ``pos`` where a line starts (or a file ends)."""
    i = bisect.bisect_right(offsets, pos) - 1
    local = pos - offsets[i]
    if local == 0:
        return pos
    with open(files[i], "rb") as f:
        f.seek(local - 1)  # a line starts at `local` iff the byte before it is a newline
        scanned = local - 1
        while block := f.read(1 << 16):
            nl = block.find(b"\n")
            if nl >= 0:
                return offsets[i] + scanned + nl + 1
            scanned += len(block)
    return offsets[i + 1]


# -- splits on disk --------------------------------------------------------------------------
def prepare_text(job_dir: Path, seed: int, maps: int, source: str | None, megabytes: float,
                 vocabulary: int) -> None:
    """Generate the corpus (when ``source`` is None) and record the splits in splits.json."""
    if source is None:
        generate_corpus(job_dir / CORPUS, seed, megabytes, vocabulary)
        files = [job_dir / CORPUS]
    else:
        files = input_files(Path(source))
    splits = compute_splits(files, maps)

    def rel(path: str) -> str:  # keep the job directory relocatable
        p = Path(path)
        return p.relative_to(job_dir).as_posix() if p.is_relative_to(job_dir) else str(p)

    write_json(job_dir / SPLITS, {
        "files": [rel(str(p)) for p in files],
        "splits": [[{"path": rel(x.path), "start": x.start, "end": x.end} for x in s]
                   for s in splits],
    })


def read_split(job_dir: Path, index: int) -> list[Piece]:
    return [Piece(**x) for x in read_json(job_dir / SPLITS)["splits"][index]]


def whole_input(job_dir: Path) -> list[Piece]:
    """The whole input as one piece per file, ignoring the splits (for verifiers)."""
    files = read_json(job_dir / SPLITS)["files"]
    return [Piece(p, 0, (job_dir / p).stat().st_size) for p in files]


def iter_blocks(job_dir: Path, pieces: Iterable[Piece], block: int = BLOCK) -> Iterator[bytes]:
    """Stream the pieces in blocks of whole lines (a line longer than a block is kept whole)."""
    for piece in pieces:
        with open(job_dir / piece.path, "rb") as f:
            f.seek(piece.start)
            left = piece.end - piece.start
            carry = b""
            while left > 0:
                data = f.read(min(block, left))
                if not data:
                    raise RuntimeError(f"{piece.path} is shorter than when it was split "
                                       f"(expected {piece.end} bytes)")
                left -= len(data)
                data = carry + data
                cut = len(data) if left == 0 else data.rfind(b"\n") + 1
                carry = data[cut:]
                if cut:
                    yield data[:cut]


def iter_lines(blocks: Iterable[bytes]) -> Iterator[str]:
    """Lines of UTF-8 text (undecodable bytes replaced), without ``\\n`` or a final ``\\r``."""
    for block in blocks:
        # blocks end on a newline, which never falls inside a multi-byte character
        lines = block.decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        for line in lines:
            yield line.removesuffix("\r")
