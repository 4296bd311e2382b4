"""``utilon.highs``: HiGHS's banner never reaches a command's standard output."""

from __future__ import annotations

import subprocess
import sys


def test_the_first_highs_of_a_process_prints_nothing() -> None:
    code = ("from utilon.highs import new_highs\n"
            "h = new_highs(); h2 = new_highs(); h.run()\n"
            "print('only this')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert res.stdout == "only this\n"
    raw = subprocess.run([sys.executable, "-c", "import highspy; highspy.Highs()"],
                         capture_output=True, text=True, check=True, timeout=60)
    assert "HiGHS" in raw.stdout  # what new_highs hides (if HiGHS stops printing, this fails)
