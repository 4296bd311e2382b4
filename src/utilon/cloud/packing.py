"""Placing VMs on physical servers: first-fit decreasing (§3.2's "bin-packing aspect")."""

from __future__ import annotations

import math

import numpy as np

from utilon.cloud.model import CloudSpec


def pack(cloud: CloudSpec, counts: tuple[int, ...] | list[int], servers: int | None = None
         ) -> tuple[np.ndarray, tuple[int, ...]]:
    """Place ``counts[k]`` VMs of each type, biggest type first, each on the first server with
    room.  With ``servers`` given, VMs that do not fit are left out; without, servers are added
    as needed.  Returns ``(host, placed)``: ``host[s, k]`` VMs of type ``k`` on server ``s``."""
    order = sorted(range(cloud.k), key=lambda k: -cloud.vm_types[k].cores)
    cap = cloud.server_cores
    free: list[int] = [cap] * (servers or 0)
    rows: list[list[int]] = [[0] * cloud.k for _ in free]
    placed = [0] * cloud.k
    for k in order:
        c = cloud.vm_types[k].cores
        s = 0
        for _ in range(int(counts[k])):
            while s < len(free) and free[s] < c:
                s += 1
            if s == len(free):
                if servers is not None:
                    break
                free.append(cap)
                rows.append([0] * cloud.k)
            free[s] -= c
            rows[s][k] += 1
            placed[k] += 1
    host = np.array(rows, dtype=np.int64).reshape(len(rows), cloud.k)
    return host, tuple(placed)


def servers_for(cloud: CloudSpec, counts: tuple[int, ...] | list[int]) -> int:
    """Servers first-fit decreasing needs to host ``counts``."""
    return len(pack(cloud, counts)[0])


def equal_pools(cloud: CloudSpec, servers: int) -> tuple[int, ...]:
    """Pools giving every VM type the same share of the servers' cores (the paper runs "the
    maximum number of pre-created VMs"; before any workload is seen, no type is favoured).
    Counts that first-fit cannot place are trimmed, and spare room is filled with small VMs."""
    share = servers * cloud.server_cores / cloud.k
    want = [math.floor(share / v.cores) for v in cloud.vm_types]
    return fill(cloud, servers, want)


def fill(cloud: CloudSpec, servers: int, want: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """``want`` trimmed to what packs on ``servers``; leftover room goes to the smallest type."""
    _, placed = pack(cloud, want, servers)
    host, _ = pack(cloud, placed, servers)
    used = int((host * cloud.cores.astype(np.int64)).sum())
    small = int(np.argmin(cloud.cores))
    spare = servers * cloud.server_cores - used
    extra = list(placed)
    if spare >= cloud.vm_types[small].cores:
        extra[small] += spare // cloud.vm_types[small].cores
        _, got = pack(cloud, extra, servers)
        return got
    return placed


def take_room(free: list[int], cores: int, count: int) -> bool:
    """First-fit ``count`` VMs of ``cores`` into per-server ``free`` cores, in place; False (and
    ``free`` unchanged) when they do not all fit.  Mirrors how the simulator places them."""
    fits = [f // cores for f in free]
    if sum(fits) < count:
        return False
    left = count
    for s, f in enumerate(fits):
        take = min(f, left)
        free[s] -= take * cores
        left -= take
        if not left:
            break
    return True
