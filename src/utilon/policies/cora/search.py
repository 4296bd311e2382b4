"""The search of CORA's exact solver: progressive filling, its one-pass fast path, and the
branch and bound of stuck rounds (sections 3 and 4 of ``exact.py``'s docstring, which holds
the algorithm, its proofs and the public API).
"""

from __future__ import annotations

from itertools import pairwise
from typing import cast

import numpy as np

from utilon.policies.cora.feasibility import Resource
from utilon.policies.cora.firstfit import first_fit, first_fit1
from utilon.policies.cora.instance import CoraInstance

__all__ = ["Ranks", "Solver"]

# --------------------------------------------------------------------------------------------
# The solver
# --------------------------------------------------------------------------------------------

class Ranks:
    """Everything the solver derives from the utility table alone (section 1's integer levels,
    each job's top run, the per-slot orders), kept across re-solves of ``exact.ExactSession``."""

    def __init__(self, utility: np.ndarray) -> None:
        u = np.minimum.accumulate(utility, axis=1)  # monotone despite 1e-12 noise
        self.levels, inv = np.unique(u, return_inverse=True)
        self.rank = inv.reshape(u.shape).astype(np.int64)
        self.top = self.rank[:, 0].copy()  # each job's best possible level
        # the last slot of each job's top run: at or before it a job is saturated
        self.tau = (self.rank == self.top[:, None]).sum(axis=1) - 1
        # does some row stay flat across a slot below its top run (a move across several
        # prefixes at once)?  Strictly decreasing rows (e.g. sigmoids) never do.
        flat = (self.rank[:, 1:] == self.rank[:, :-1]) & (self.rank[:, 1:] < self.top[:, None])
        self.has_flat = bool(flat.any())
        self.max_level = int(self.levels.shape[0]) - 1
        # built on first use: per column d, the jobs sorted by rank[:, d + 1]; and the rows
        # laid end to end for ``_count_at_least``
        self.full_order: np.ndarray | None = None
        self.flat: np.ndarray | None = None


class Solver:
    def __init__(self, inst: CoraInstance, node_limit: int | None,
                 ranks: Ranks | None = None) -> None:
        self.inst = inst
        self.n, self.t_n, self.r_n = inst.jobs, inst.slots, inst.resources
        self.ranks = ranks = Ranks(inst.utility) if ranks is None else ranks
        self.levels, self.rank, self.top, self.tau = (ranks.levels, ranks.rank, ranks.top,
                                                      ranks.tau)
        self.has_flat, self.max_level = ranks.has_flat, ranks.max_level
        dem = inst.demand
        p = dem if inst.cap is None else np.minimum(inst.cap, dem)
        self.res = [Resource(inst.capacity[r], dem[:, r], p[:, r]) for r in range(self.r_n)]
        self.uncapped = not any(res.capped for res in self.res)
        self.vector_moves = all(res.vector_moves for res in self.res)
        self.node_limit = node_limit
        self.nodes = 0
        self.rounds = 0
        self.branchings = 0
        self.exhausted = False
        self.dem_sum = dem.sum(axis=1)
        self.dem_mat = dem.astype(np.float64)
        self.dem1 = self.dem_mat[:, 0].copy()
        # a compressed copy of ``ranks.full_order`` restricted to the rows in ``_rows`` (a
        # superset of the unfixed jobs)
        self._order = np.zeros((0, 0), dtype=np.int64)
        self._keys = np.zeros((0, 0), dtype=np.int64)
        self._rows = np.zeros(self.n, dtype=bool)

    # -- feasibility --------------------------------------------------------------------------
    def feasible(self, dl: np.ndarray) -> bool:
        return all(res.feasible(dl) for res in self.res)

    def movable(self, dl: np.ndarray, idx: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        ok = tgt >= 0
        for res in self.res:
            if ok.any():
                sel = np.flatnonzero(ok)
                ok[sel] = res.movable(dl, idx[sel], tgt[sel])
        return ok

    def tick(self) -> None:
        """Count a search node; past the budget the search only completes greedily."""
        self.nodes += 1
        if self.node_limit is not None and self.nodes > self.node_limit:
            self.exhausted = True

    # -- levels -------------------------------------------------------------------------------
    def _count_at_least(self, idx: np.ndarray, lev: np.ndarray) -> np.ndarray:
        """Number of slots t with rank[i, t] >= lev_i, for the jobs ``idx``: one binary search
        in the rows laid end to end (-rank is sorted within a row, rows are offset apart)."""
        stride = self.max_level + 2
        if self.ranks.flat is None:
            self.ranks.flat = ((-self.rank) + (np.arange(self.n) * stride)[:, None]).ravel()
        pos = np.searchsorted(self.ranks.flat, idx * stride - lev, side="right")
        return pos - idx * self.t_n

    def level_deadline(self, idx: np.ndarray, level: int) -> np.ndarray:
        """D_i(level): the last slot at which job i is still worth >= level, saturated at the
        job's top value (a job cannot rise above u[i, 0]; it simply stays there)."""
        return self._count_at_least(idx, np.minimum(level, self.top[idx])) - 1

    def next_deadline(self, idx: np.ndarray, dl: np.ndarray) -> np.ndarray:
        """E_i: the last slot worth strictly more than slot dl_i (-1 if none)."""
        return self._count_at_least(idx, self.rank[idx, dl[idx]] + 1) - 1

    def _lambda_level(self, dl: np.ndarray, unf: np.ndarray) -> int:
        """The largest feasible common level without caps (section 3a)."""
        best = self.max_level
        t_n = self.t_n
        if t_n < 2:
            return best
        if (self._order.shape[1] == 0 or not self._rows[unf].all()
                or self._order.shape[0] > 2 * unf.shape[0] + 64):
            # keep only the unfixed rows, column by column (sibling branches of the search
            # may need rows that a previous branch dropped: then start from the full order)
            full = self.ranks.full_order
            if full is None:
                full = self.ranks.full_order = np.argsort(self.rank[:, 1:], axis=0,
                                                          kind="stable")
            base = self._order if self._rows[unf].all() else full
            keep = np.zeros(self.n, dtype=bool)
            keep[unf] = True
            cols = base.T
            self._order = cols[keep[cols]].reshape(t_n - 1, -1).T
            self._keys = np.take_along_axis(self.rank[:, 1:], self._order, axis=0)
            self._rows = keep
        order = self._order
        unfixed = np.zeros(self.n, dtype=bool)
        unfixed[unf] = True
        ds = np.arange(t_n - 1)
        # a job enters prefix d when the level passes rank[i, d+1], unless that is already its
        # top value (saturated jobs never move again)
        elig = unfixed[order] & (dl[order] > ds[None, :]) & (self._keys < self.top[order])
        for res in self.res:
            w = np.where(elig, res.dem_all[order], 0.0)
            cs = np.cumsum(w, axis=0)
            over = cs > res.slack(dl)[None, : t_n - 1]
            has = over.any(axis=0)
            if has.any():
                first = over.argmax(axis=0)
                keys = self._keys[first, ds]
                best = min(best, int(keys[has].min()))
        return best

    def _search_level(self, dl: np.ndarray, unf: np.ndarray, hi: int) -> int:
        """The largest feasible common level in [current, hi]: galloping, then bisection
        (consecutive rounds usually stop a few dozen ranks apart)."""
        lo = int(self.rank[unf, dl[unf]].min())  # the current state is feasible
        checks = [res.checker(dl, unf) for res in self.res]
        trial = dl.copy()
        cur = dl[unf]

        def ok(level: int) -> bool:
            trial[unf] = np.minimum(cur, self.level_deadline(unf, level))
            return all(check(trial) for check in checks)

        step = 8
        while lo < hi:
            probe = min(hi, lo + step)
            if not ok(probe):
                hi = probe - 1
                break
            lo = probe
            step *= 4
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def level(self, dl: np.ndarray, unf: np.ndarray) -> int:
        if self.uncapped:
            return self._lambda_level(dl, unf)
        return self._search_level(dl, unf, self.max_level)

    # -- progressive filling --------------------------------------------------------------------
    def top_down(self, dl: np.ndarray, fixed: np.ndarray) -> bool:
        """Progressive filling prefix by prefix, last prefix first (section 3, fast path
        without caps).  Returns False where it cannot decide (a move across several prefixes
        at once, or a stuck tie), leaving a valid intermediate state for the round loop."""
        t_n = self.t_n
        # the slack of prefix d only counts jobs due by d; jobs crossing the prefixes above d
        # stop at d + 1 until they cross d, so each slack is read once, before any crossing
        slack0 = np.stack([res.slack(dl) for res in self.res], axis=1)  # (T, R)
        slack1 = slack0[:, 0].tolist()
        unf = np.flatnonzero(~fixed)
        sat0 = self.tau[unf] >= dl[unf]
        if sat0.any():  # already at their top value: they never move
            fixed[unf[sat0]] = True
            unf = unf[~sat0]
        # a job standing at d + 1 is saturated iff its top run ends there (it would have
        # been fixed higher up otherwise): only look when some job's run ends at d + 1
        tau_cnt = np.bincount(self.tau[unf], minlength=t_n + 1).tolist()
        start = dl[unf]
        by_start = np.argsort(start, kind="stable")
        bounds = np.searchsorted(start[by_start], np.arange(t_n + 1))
        arr = np.zeros(0, dtype=np.int64)
        one = self.r_n == 1
        dem1 = self.dem1
        # a job's deadline only needs writing when it stops: blocked at d means due at d + 1
        for d in range(t_n - 2, -1, -1):
            # who stands at d + 1: the jobs that crossed d + 1, and those that started there
            lo, hi = bounds[d + 1], bounds[d + 2]
            if hi > lo:
                arr = np.concatenate((arr, unf[by_start[lo:hi]]))
            if arr.size == 0:
                continue
            if tau_cnt[d + 1]:
                sat = self.tau[arr] > d
                if sat.any():  # at their top value: they never move again
                    stop = arr[sat]
                    fixed[stop] = True
                    dl[stop] = d + 1
                    arr = arr[~sat]
                    if arr.size == 0:
                        continue
            if self.has_flat and (self.rank[arr, d] == self.rank[arr, d + 1]).any():
                dl[arr] = d + 1
                return False  # a move across several prefixes at once: not decomposable
            if one:
                if float(dem1[arr].sum()) <= slack1[d]:
                    continue  # everyone fits: the order does not matter
            elif (self.dem_mat[arr].sum(axis=0) <= slack0[d]).all():
                continue
            key = self.rank[arr, d + 1]
            srt = np.lexsort((arr, key))
            arr, key = arr[srt], key[srt]
            if arr.size <= 128:
                res = self._scan_small(arr, key, slack0[d])
            else:
                res = self._scan_large(arr, key, slack0[d])
            if res is None:
                dl[arr] = d + 1
                return False  # a stuck tie: the round loop branches on it
            acc, blk = res
            if blk.size:
                fixed[blk] = True
                dl[blk] = d + 1
            arr = acc
        fixed[arr] = True  # they crossed prefix 0: due in slot 0, at their top value
        dl[arr] = 0
        return True

    def _scan_small(self, arr: np.ndarray, key: np.ndarray,
                    slack: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``first_fit`` on numpy input (plain Python is faster than numpy on short lists)."""
        if self.r_n == 1:
            need = self.dem1[arr]
            cs = np.cumsum(need)
            # the longest prefix that fits as a whole crosses at once (backed off to the
            # start of a group of equal keys); the rest goes through the loop
            i = int(np.searchsorted(cs, float(slack[0]), side="right"))
            while 0 < i < key.shape[0] and key[i - 1] == key[i]:
                i -= 1
            left = float(slack[0]) - (float(cs[i - 1]) if i else 0.0)
            out = first_fit1(arr[i:].tolist(), key[i:].tolist(), need[i:].tolist(), left)
            if out is not None:
                out = (arr[:i].tolist() + out[0], out[1])
        else:
            out = first_fit(arr.tolist(), key.tolist(), self.dem_mat[arr].tolist(),
                             slack.tolist())
        if out is None:
            return None
        return np.asarray(out[0], dtype=np.int64), np.asarray(out[1], dtype=np.int64)

    def top_down_small(self, dl: np.ndarray, fixed: np.ndarray) -> bool:
        """``top_down`` in plain Python, for few jobs (numpy's per-call cost dominates)."""
        t_n = self.t_n
        rank = cast(list[list[int]], self.rank.tolist())
        tau = cast(list[int], self.tau.tolist())
        one = self.r_n == 1
        dem1 = cast(list[float], self.dem1.tolist())
        dems = cast(list[list[float]], self.dem_mat.tolist())
        slacks = cast(list[list[float]],
                      np.stack([res.slack(dl) for res in self.res], axis=1).tolist())  # (T, R)
        dls = cast(list[int], dl.tolist())
        fix = cast(list[bool], fixed.tolist())
        buckets: list[list[int]] = [[] for _ in range(t_n + 1)]
        for i in range(self.n):
            if fix[i]:
                continue
            if tau[i] >= dls[i]:
                fix[i] = True  # already at the top value
            else:
                buckets[dls[i]].append(i)
        arr: list[int] = []
        ok = True
        for d in range(t_n - 2, -1, -1):
            arr.extend(buckets[d + 1])
            if not arr:
                continue
            if any(tau[i] > d for i in arr):
                for i in arr:
                    if tau[i] > d:
                        fix[i], dls[i] = True, d + 1
                arr = [i for i in arr if tau[i] <= d]
                if not arr:
                    continue
            if self.has_flat and any(rank[i][d] == rank[i][d + 1] for i in arr):
                ok = False
                break
            if one:
                if sum(dem1[i] for i in arr) <= slacks[d][0]:
                    continue
            elif all(sum(dems[i][r] for i in arr) <= slacks[d][r] for r in range(self.r_n)):
                continue
            col = [row[d + 1] for row in rank]
            arr.sort(key=lambda i: (col[i], i))
            keys = [col[i] for i in arr]
            out = (first_fit1(arr, keys, [dem1[i] for i in arr], slacks[d][0]) if one
                   else first_fit(arr, keys, [dems[i] for i in arr], slacks[d]))
            if out is None:
                ok = False
                break
            for i in out[1]:
                fix[i], dls[i] = True, d + 1
            arr = out[0]
        if ok:
            for i in arr:
                fix[i], dls[i] = True, 0
        else:
            for i in arr:
                dls[i] = d + 1
        dl[:] = dls
        fixed[:] = fix
        return ok

    def _scan_large(self, arr: np.ndarray, key: np.ndarray,
                    slack: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The same first fit, vectorised: one cumulative sum per overflow."""
        need = self.dem_mat[arr]
        acc: list[np.ndarray] = []
        blk: list[np.ndarray] = []
        pos = 0
        while pos < arr.shape[0]:
            cs = np.cumsum(need[pos:], axis=0)
            over = (cs > slack[None, :]).any(axis=1)
            if not over.any():
                acc.append(arr[pos:])
                break
            m = pos + int(over.argmax())
            # never split a group of equal keys: they are candidates of the same level
            a = pos + int(np.searchsorted(key[pos:], key[m], side="left"))
            c = pos + int(np.searchsorted(key[pos:], key[m], side="right"))
            if a > pos:
                acc.append(arr[pos:a])
                slack = slack - need[pos:a].sum(axis=0)
            alone = (need[a:c] <= slack[None, :]).all(axis=1)
            blk.append(arr[a:c][~alone])  # cannot cross even alone: bottlenecks
            if alone.any():
                tot = need[a:c][alone].sum(axis=0)
                if (tot > slack).any():
                    return None
                acc.append(arr[a:c][alone])
                slack = slack - tot
            # whoever does not fit now never will (the slack only shrinks)
            fits = (need[c:] <= slack[None, :]).all(axis=1)
            blk.append(arr[c:][~fits])
            arr, key, need = arr[c:][fits], key[c:][fits], need[c:][fits]
            pos = 0
        empty = np.zeros(0, dtype=np.int64)
        return (np.concatenate(acc) if acc else empty, np.concatenate(blk) if blk else empty)

    def fill(self, dl: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Complete a feasible state (deadline bounds ``dl``, ``fixed`` jobs, both updated in
        place) to the lexicographically best all-fixed state."""
        while True:
            if self.uncapped:
                done = (self.top_down_small(dl, fixed) if self.n <= 48
                        else self.top_down(dl, fixed))
                self.rounds += 1
                if done:
                    return dl, fixed
            stuck = self.rounds_until_stuck(dl, fixed)
            if stuck is None:
                return dl, fixed
            choices = self.stuck_choices(dl, cand=stuck[0], nxt=stuck[1])
            if len(choices) == 1:  # no real choice: continue in place (no recursion)
                self.apply(choices[0], dl, fixed, stuck[0], stuck[1])
                continue
            return self.explore(dl, fixed, choices, stuck[0], stuck[1])

    def rounds_until_stuck(self, dl: np.ndarray,
                           fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Rounds of section 3 until all jobs are fixed (None) or a round is stuck: then the
        candidates that could each improve alone, and their next deadlines."""
        while True:
            unf = np.flatnonzero(~fixed)
            if unf.size == 0:
                return None
            self.rounds += 1
            lev = self.level(dl, unf)
            dl[unf] = np.minimum(dl[unf], self.level_deadline(unf, lev))
            val = self.rank[unf, dl[unf]]
            at_top = val == self.top[unf]  # saturated: fixed at their best value
            fixed[unf[at_top]] = True
            unf, val = unf[~at_top], val[~at_top]
            if unf.size == 0:
                continue
            cand_mask = val == lev
            # cheap per-job move tests: test everyone (fixes future bottlenecks now)
            test = unf if self.vector_moves else unf[cand_mask]
            nxt = self.next_deadline(test, dl)
            blocked = ~self.movable(dl, test, nxt)
            fixed[test[blocked]] = True
            is_cand = np.zeros(self.n, dtype=bool)
            is_cand[unf[cand_mask]] = True
            free = test[~blocked]
            cand = free[is_cand[free]]
            if cand.size == 0:
                if not blocked.any() and not at_top.any():
                    raise RuntimeError("progressive filling made no progress")  # pragma: no cover
                continue
            cand_next = nxt[~blocked][is_cand[free]]
            trial = dl.copy()
            trial[cand] = cand_next
            if not self.feasible(trial):
                return cand, cand_next
            # else they all rise together in the next round

    # -- stuck rounds ---------------------------------------------------------------------------
    def chains(self, cand: np.ndarray, dl: np.ndarray, nxt: np.ndarray) -> list[np.ndarray]:
        """Candidates grouped into dominance chains (section 4); improve a prefix of each."""
        rank = self.rank[cand]
        keys = np.concatenate([rank, dl[cand][:, None], nxt[:, None]], axis=1)
        _, grp = np.unique(keys, axis=0, return_inverse=True)
        grp = grp.ravel()
        out: list[np.ndarray] = []
        for g in np.unique(grp):
            members = np.flatnonzero(grp == g)
            members = members[np.lexsort((cand[members], self.dem_sum[cand[members]]))]
            run = [members[0]]
            for a, b in pairwise(members):
                if self.dominates(cand[a], cand[b]):
                    run.append(b)
                else:
                    out.append(np.asarray(run))
                    run = [b]
            out.append(np.asarray(run))
        # larger chains first, then smaller demands: the first leaf is a good greedy choice
        out.sort(key=lambda c: (-c.shape[0], float(self.dem_sum[cand[c[0]]])))
        return out

    def dominates(self, a: int, b: int) -> bool:
        ks = np.arange(self.t_n + 2)
        for res in self.res:
            da, db = res.dem_all[a], res.dem_all[b]
            if da == 0 and db == 0:
                continue
            pos = np.searchsorted(res.jobs, [a, b])
            pa = res.p[pos[0]] if da > 0 else 0.0
            pb = res.p[pos[1]] if db > 0 else 0.0
            ga = np.maximum(0.0, da - pa * ks)
            gb = np.maximum(0.0, db - pb * ks)
            if (-np.diff(ga) > -np.diff(gb)).any():
                return False
        return True

    def stuck_choices(self, dl: np.ndarray, cand: np.ndarray,
                      nxt: np.ndarray) -> list[list[np.ndarray]]:
        """A stuck round (section 4): every way (up to dominance) to improve as many of the
        candidates as possible, each given as the improved jobs per chain."""
        self.branchings += 1
        chains = self.chains(cand, dl, nxt)
        sizes = np.array([c.shape[0] for c in chains])
        rest = np.concatenate((np.cumsum(sizes[::-1])[::-1], [0]))
        trial = dl.copy()
        best_cnt = -1
        vectors: list[list[int]] = []
        counts = [0] * len(chains)
        tgt_all = np.empty(self.n, dtype=np.int64)
        tgt_all[cand] = nxt

        def bound(gi: int) -> int:
            todo = np.concatenate([cand[c] for c in chains[gi:]])
            return min(res.relax_bound(trial, todo, tgt_all[todo]) for res in self.res)

        def dfs(gi: int, cnt: int) -> None:
            nonlocal best_cnt, vectors
            if gi == len(chains):
                if cnt > best_cnt:
                    best_cnt, vectors = cnt, [counts.copy()]
                elif cnt == best_cnt:
                    vectors.append(counts.copy())
                return
            if self.exhausted and best_cnt >= 0:
                return
            if cnt + min(int(rest[gi]), bound(gi)) < best_cnt:
                return
            members = cand[chains[gi]]
            tgts = nxt[chains[gi]]
            lo, hi = 0, members.shape[0]  # largest k whose first-k move is feasible
            while lo < hi:
                mid = (lo + hi + 1) // 2
                trial[members[:mid]] = tgts[:mid]
                self.tick()
                ok = self.feasible(trial)
                trial[members[:mid]] = dl[members[:mid]]
                if ok:
                    lo = mid
                else:
                    hi = mid - 1
            for k in range(lo, -1, -1):
                if cnt + k + int(rest[gi + 1]) < best_cnt:
                    break
                trial[members[:k]] = tgts[:k]
                counts[gi] = k
                dfs(gi + 1, cnt + k)
                trial[members[:k]] = dl[members[:k]]
            counts[gi] = 0

        dfs(0, 0)
        return [[chain[:k] for chain, k in zip(chains, vec, strict=True)] for vec in vectors]

    def apply(self, choice: list[np.ndarray], dl: np.ndarray, fixed: np.ndarray,
              cand: np.ndarray, nxt: np.ndarray) -> None:
        """Improve the chosen candidates (deadline to their next one); fix the others at the
        stuck level."""
        up = np.concatenate(choice) if choice else np.zeros(0, dtype=np.int64)
        keep = np.ones(cand.shape[0], dtype=bool)
        keep[up] = False
        dl[cand[up]] = nxt[up]
        fixed[cand[keep]] = True

    def explore(self, dl: np.ndarray, fixed: np.ndarray, choices: list[list[np.ndarray]],
                cand: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solve every choice and keep the lexicographically best outcome."""
        best: tuple[np.ndarray, np.ndarray] | None = None
        best_key = np.zeros(0, dtype=np.int64)
        for choice in choices:
            c_dl, c_fixed = dl.copy(), fixed.copy()
            self.apply(choice, c_dl, c_fixed, cand, nxt)
            out = self.fill(c_dl, c_fixed)
            key = np.sort(self.rank[np.arange(self.n), out[0]])
            if best is None or _lex_greater(key, best_key):
                best, best_key = out, key
            if self.exhausted:
                break  # out of budget: keep the best completed choice
        assert best is not None
        return best


def _lex_greater(a: np.ndarray, b: np.ndarray) -> bool:
    diff = np.flatnonzero(a != b)
    return bool(diff.size) and bool(a[diff[0]] > b[diff[0]])
