"""The few torch.distributed calls the distributed front end makes, in one place.

Everything goes through all_gather_object on the caller's process group: every rank
learns what every other rank did, so a failure anywhere is raised everywhere, and no
rank waits on a message another rank will never send except through a collective the
group's timeout bounds (init_process_group(timeout=...); gloo honours it). Without an
initialised process group the calls act for a world of one, so the same code saves and
loads in a single process. Background saves talk on a second group over the same ranks
(side_group): collectives from two threads on one group could interleave differently
on different ranks.
"""

import datetime

__all__ = []  # private module

_side = {}  # (id of the group, timeout) -> the side group for background saves


def dist_module():
    import torch.distributed as dist

    return dist


def active(group):
    dist = dist_module()
    if dist.is_available() and dist.is_initialized():
        return True
    if group is not None:
        raise RuntimeError("ckpz.distributed: group= given but torch.distributed is not initialised")
    return False


def rank_world(group):
    if not active(group):
        return 0, 1
    dist = dist_module()
    return dist.get_rank(group), dist.get_world_size(group)


def gather(obj, group):
    """[obj of rank 0, obj of rank 1, ...] on every rank."""
    if not active(group):
        return [obj]
    dist = dist_module()
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def global_ranks(group):
    dist = dist_module()
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    ranks = dist.distributed_c10d._pg_group_ranks[group]
    return [g for g, _ in sorted(ranks.items(), key=lambda kv: kv[1])]


def global_rank(group, rank):
    return global_ranks(group)[rank]


def side_group(group, timeout):
    """A gloo group over the ranks of group, made once (a collective over the default
    group: every process calls the first background save)."""
    if not active(group):
        return None
    key = (id(group), timeout)
    if key not in _side:
        dist = dist_module()
        t = datetime.timedelta(seconds=timeout) if timeout is not None else None
        kw = {"timeout": t} if t is not None else {}
        _side[key] = dist.new_group(ranks=global_ranks(group), backend="gloo", **kw)
    return _side[key]
