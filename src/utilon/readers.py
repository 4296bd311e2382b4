"""Reading what users write, with one-line errors: a JSON file read into a pydantic model, a
failed validation named by its file and field, a duration such as ``90m``.

Every room that reads a user's input uses these (scenarios, Cura's cloud scenarios, the
league file, the one-shot solvers' instances, the trace commands), so they sit below all of
them (docs/architecture.md, "Rooms").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from utilon.errors import ScenarioError, UtilonError

if TYPE_CHECKING:  # pydantic loads with the first file read: the CLI imports this module
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")


def _field_path(loc: tuple[Any, ...], data: Any, missing: bool) -> str:
    """Dotted path of an error, keeping only parts that index the user's data.

    pydantic puts union tags (``deadline``, ``float``, ``tagged-union[...]``) into error
    locations; walking the input alongside drops exactly those and keeps the user's fields.
    """
    out = ""
    cur = data
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        in_dict = isinstance(cur, dict) and part in cur
        in_list = isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
        if in_dict or in_list:
            cur = cur[part]
        elif not (last and missing):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def read_json_model(path: Path, model: type[M], fix: str) -> M:
    """A JSON file validated against ``model`` (one-shot solver instances), with one-line
    errors naming the file, the line or the field, and ``fix``."""
    from pydantic import ValidationError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError("no such file", where=str(path), fix="check the path") from None
    except IsADirectoryError:
        raise ScenarioError("is a directory, not a file", where=str(path)) from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"not UTF-8 text (byte {e.start})", where=str(path),
                            fix="save the instance as UTF-8 JSON") from None
    except RecursionError:
        raise ScenarioError("nested too deeply to read", where=str(path), fix=fix) from None
    except json.JSONDecodeError as e:
        raise ScenarioError(f"not valid JSON ({e.msg})", where=f"{path}:{e.lineno}:{e.colno}",
                            fix=fix) from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        more = f" (and {e.error_count() - 1} more problem(s))" if e.error_count() > 1 else ""
        raise ScenarioError(first["msg"] + more, where=f"{path}: {loc}", fix=fix) from None


def pydantic_error(exc: ValidationError, data: Any, source: str,
                   doc: str = "docs/scenario.md") -> ScenarioError:
    """The first problem of a failed validation as one line naming the file and the field."""
    # A typo'd key is the root cause of the "missing field" error that comes with it.
    rank = {"extra_forbidden": 0, "union_tag_invalid": 1}
    errors = sorted(exc.errors(), key=lambda e: rank.get(e["type"], 2))
    err = errors[0]
    field = _field_path(tuple(err["loc"]), data, err["type"] == "missing")
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field (typo?)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    elif err["type"] == "union_tag_invalid":
        msg = err["msg"].replace("Input tag", "value")
    extra = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
    return ScenarioError(f"{msg}{extra}", where=f"{source}: {field}",
                         fix=f"see {doc}")


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h|d)?\s*$")
_UNIT = {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_seconds(text: str | None, option: str) -> float | None:
    """``"3600"``, ``"90m"``, ``"1h"``, ``"2d"`` -> seconds."""
    if text is None:
        return None
    m = _DURATION.match(text)
    if not m:
        raise UtilonError(f"{text!r} is not a time", where=option,
                          fix="write seconds or a number with s, m, h or d, e.g. 1h")
    return float(m.group(1)) * _UNIT[m.group(2)]
