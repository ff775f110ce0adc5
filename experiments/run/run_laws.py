"""A run's congestion-control laws: every point's, loaded once for the whole run (kernel-wide, shared by name)
where the testbed says the flows' senders are, and released however the run ends.

law_systems gives this machine, or each sender's host over a connection kept for the whole run: each
repetition's testbed connects and disconnects, the laws outlive it.
"""
from __future__ import annotations

from contextlib import contextmanager

from ccrig.tcp_modules.manager import CcSet
from ccrig.topologies import testbeds


@contextmanager
def loaded(exp, points, commands, prefix: str):
    """Yields the run's CcSet with every point's laws loaded (modules or BPF, as the spec's cc_form says)."""
    bed = testbeds.get(exp.testbed)
    ccs: dict = {}   # the sender node on a remote testbed (None: this machine) -> its flows' cc values
    for p in points:
        e = p.experiment
        topo = e.topology.build(e.n_flows)
        # pair_order: rotate puts each flow on every pair in turn, so each sender needs every flow's law
        for rep in range(len(topo.pairs) if e.pair_order == "rotate" and bed.remote else 1):
            for f, (sender, _) in zip(e.flow_list(), e.flow_pairs(topo, rep)):
                ccs.setdefault(sender if bed.remote else None, []).append(f.cc)
    with bed.law_systems([n for n in ccs if n is not None], commands, prefix) as systems:
        cc = CcSet(commands, prefix, exp.cc_form, systems)
        try:
            cc.prepare(ccs)   # a failure or Ctrl-C while loading releases what it had loaded
            yield cc
        finally:
            left = cc.release()
            if left:
                print(f"warning: could not remove congestion control(s) {', '.join(left)}; run `ccrig clean`"
                      + (" -i INVENTORY" if bed.remote else ""))
