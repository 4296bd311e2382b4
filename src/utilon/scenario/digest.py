"""A short digest of a scenario's content: what tells two runs of different scenarios apart.

Trace imports are named after their trace file whatever hour they cover, so a name does not
identify a scenario; the digest of its validated content (the seed left out: seeds of one
scenario are runs of the same scenario) does.  Default run folders end with it, every summary
carries it, and ``utilon report`` refuses to put runs of different digests side by side unless
told to (``--allow-mixed``).
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

DIGEST_CHARS = 8


def scenario_digest(spec: BaseModel) -> str:
    """The first :data:`DIGEST_CHARS` hex digits of the SHA-256 of the spec's canonical JSON,
    its ``seed`` field left out."""
    data = spec.model_dump(mode="json", by_alias=True)
    data.pop("seed", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
