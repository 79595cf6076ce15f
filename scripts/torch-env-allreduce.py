"""A torch program for `symmem launch`: init_process_group("env://") needs
MASTER_ADDR/MASTER_PORT free for torch's own store, which symmem launch
leaves free (symmem's store is at SYMMEM_STORE). Gloo, so that several ranks
may share one machine without a GPU each."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
want = world * (world + 1) / 2
ok = bool((t == want).all())
print(f"torch rank {rank}/{world}: all_reduce {t.tolist()} want {want} ok={ok} "
      f"MASTER_PORT={os.environ['MASTER_PORT']} SYMMEM_STORE={os.environ.get('SYMMEM_STORE')}", flush=True)
dist.destroy_process_group()
raise SystemExit(0 if ok else 1)
