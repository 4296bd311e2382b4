"""First fit across one prefix of jobs in key order: which jobs "cross" a time-slot boundary
and which are blocked, for one resource (``first_fit1``) or several (``first_fit``).  Used by
the exact CORA search (``exact.py``) to decide a level's ties; plain Python lists, because
the prefixes are short and numpy's per-call overhead would dominate.
"""

from __future__ import annotations


def first_fit1(ids: list[int], keys: list[int], need: list[float],
                slack: float) -> tuple[list[int], list[int]] | None:
    """First fit across one prefix in key order, one resource: a job crosses if its demand
    fits in what is left of the slack, else it is blocked.  Jobs with equal keys are
    candidates of the same level and are decided as one group: those that do not fit alone
    are blocked, the others cross together, or the tie is stuck (None)."""
    acc: list[int] = []
    blk: list[int] = []
    n = len(ids)
    low = list(need)  # suffix minima: once nobody left fits, stop
    for q in range(n - 2, -1, -1):
        if low[q + 1] < low[q]:
            low[q] = low[q + 1]
    s = slack
    i = 0
    while i < n:
        if low[i] > s:
            blk.extend(ids[i:])
            break
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        if j == i + 1:
            if need[i] <= s:
                s -= need[i]
                acc.append(ids[i])
            else:
                blk.append(ids[i])
            i = j
            continue
        tot = 0.0
        ok = []
        for q in range(i, j):
            if need[q] <= s:
                ok.append(ids[q])
                tot += need[q]
            else:
                blk.append(ids[q])
        if tot > s:
            return None
        s -= tot
        acc.extend(ok)
        i = j
    return acc, blk


def first_fit(ids: list[int], keys: list[int], needs: list[list[float]],
               slack: list[float]) -> tuple[list[int], list[int]] | None:
    """``first_fit1`` for several resources (a job must fit in every one)."""
    acc: list[int] = []
    blk: list[int] = []
    n = len(ids)
    r_n = len(slack)
    sl = list(slack)
    # per resource suffix minima: once one resource has no room for anyone left, stop
    low = [list(col) for col in zip(*needs, strict=True)] if n else []
    for col in low:
        for q in range(n - 2, -1, -1):
            if col[q + 1] < col[q]:
                col[q] = col[q + 1]
    i = 0
    while i < n:
        if any(low[r][i] > sl[r] for r in range(r_n)):
            blk.extend(ids[i:])
            break
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        tots = [0.0] * r_n
        ok = []
        for q in range(i, j):
            nq = needs[q]
            if all(nq[r] <= sl[r] for r in range(r_n)):
                ok.append(ids[q])
                tots = [tots[r] + nq[r] for r in range(r_n)]
            else:
                blk.append(ids[q])
        if j > i + 1 and any(tots[r] > sl[r] for r in range(r_n)):
            return None
        sl = [sl[r] - tots[r] for r in range(r_n)]
        acc.extend(ok)
        i = j
    return acc, blk
