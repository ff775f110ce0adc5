"""Programs shipped to the nodes: each runs on a node (in a namespace, in the vm's guest, on an SSH host) as a
process of its own, started through the testbed, and speaks to the run only through its output. They import
nothing of ccrig's but the ground floor, so a node needs no more of ccrig than this folder.

    sampler.py / sampler.c   TCP_INFO of the flows' sockets, every namespace of a machine from one process
    sources.py               the traffic sources' senders and receivers (UDP schedules, interactive messages)
    filexfer.py              the finite-file transfers of the files workload
    warm.py                  one TCP connection per route, every namespace from one process (locked cwnds)
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLER = HERE / "sampler.py"
SAMPLER_C = HERE / "sampler.c"
SOURCES = HERE / "sources.py"
FILEXFER = HERE / "filexfer.py"
WARM = HERE / "warm.py"
