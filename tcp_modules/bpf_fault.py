"""A kernel fault that BPF congestion controls meet on some kernels, found in a trace of TCP_INFO samples.

What happens: the kernel skips a BPF struct_ops program now and then and the trampoline that should have run it
returns an uninitialised stack word instead. For `ssthresh` the kernel stores that word in snd_ssthresh;
proportional rate reduction then turns it into a cwnd of 10^8..10^9, the flow bursts hundreds of packets into the
queue, and the losses that follow halve the garbage threshold for a second or more before the law is back in
control. Our programs put it right at the next ACK (bpf/ccrig_tcp.bpf.h, ccrig_in_ack_event: the kernel skips every
program of ours in the softirq that skipped ssthresh, so not before): the threshold becomes the law's decrease at
the window the kernel saved before the call (prior_cwnd), and a window already set from the garbage becomes that
threshold; each variant counts its repairs (summary.json `bpf_repaired`, tests/host/test_bpf_repair.py). What the
ACK that met the fault sent is sent: PRR reads the garbage threshold as a negative int and sizes the window from it
at once, so that burst remains; the window is the law's from the next ACK on, and the second burst (the window set
to the garbage when recovery ends) no longer comes. Where every ACK of a recovery was skipped, ssthresh applies the
law to the window of the last loss it saw instead of the garbage one. Seen on this project's machine (6.18.44-fc, a
sandbox's build of 6.18, not upstream Linux): its __bpf_prog_enter returns 0 (skip the program) when the CPU runs
it on top of a thread of the machine's init process (current->tgid == 1: a softirq, i.e. an ACK or the RACK
reordering timer, interrupting PID 1), and the word is the address the return thunk leaves on the stack
(srso_return_thunk + 5 = 2183157349 here, srso_alias_return_thunk + 5 = 2165326096 on another CPU model).
Reproduced with the kernel's own reno written as a BPF program (tests/host/bpf_fault_repro.py), so it is not the
laws' doing; built-in congestion controls are plain kernel functions and are never skipped.

Detected per sample, as before the repair (a sample taken before the next ACK still sees the garbage, and the
stretch it starts is left out): a threshold or window of 2^24 segments or more, where the laws saturate
(CCRIG_CAP_SEGS in include/ccrig_law.h) and no path we build comes near, other than the kernel's "infinite"
ssthresh (the kernel reports a garbage ssthresh above it as infinite, but then the window is garbage too). Excluded
per trace: the samples hit and the ones after them up to the next sample in congestion avoidance (Open state, cwnd
>= ssthresh, not hit) whose threshold is at most twice the largest Open window before the fault, since until then
the window is the fault's, not the law's.

Not detectable here: a skipped callback that returns nothing (cong_avoid, set_state) loses that ACK's
increase, a fraction of a segment, which no law check can tell from sampling noise.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

INFINITE_SSTHRESH = 0x7FFFFFFF   # TCP_INFINITE_SSTHRESH: the value before the first loss
LIMIT = 1 << 24                  # CCRIG_CAP_SEGS: no law's window or threshold reaches it
OPEN = 0                         # tcp_info ca_state TCP_CA_Open

Trace = Sequence[tuple[float, Mapping]]   # (time, TCP_INFO fields as experiments/nodes/sampler.py names them)


def hit(info: Mapping) -> bool:
    """Whether one TCP_INFO sample shows the fault: a window or threshold beyond any law's."""
    ss, cwnd = info.get("snd_ssthresh", 0), info.get("snd_cwnd", 0)
    return cwnd >= LIMIT or (ss >= LIMIT and ss != INFINITE_SSTHRESH)


def episodes(trace: Trace) -> list[tuple[int, int]]:
    """The faults in a trace, each as [first, end) sample indices: from a sample hit to the next sample in
    congestion avoidance that is not, at a threshold the path could have set (at most twice the largest Open
    window before the fault), or to the end of the trace. A law with a small decrease can be back in congestion
    avoidance with the fault's threshold still far above the path: CI at d4b0157 had poly_piad, whose decrease
    is a few segments a loss, at ssthresh 298 on a path that held 48, and in Recovery for the 2.7 s left."""
    out: list[tuple[int, int]] = []
    start = bound = None
    wmax = 0   # the largest Open window outside the faults so far
    for i, (_, info) in enumerate(trace):
        cwnd, ss, state = info.get("snd_cwnd", 0), info.get("snd_ssthresh", 0), info.get("ca_state")
        if hit(info):
            if start is None:
                start, bound = i, 2 * wmax or None
        elif start is None:
            wmax = max(wmax, cwnd) if state == OPEN else wmax
        elif state == OPEN and cwnd >= ss and (bound is None or ss <= bound):
            out.append((start, i))
            start = None
            wmax = max(wmax, cwnd)
    if start is not None:
        out.append((start, len(trace)))
    return out


def clean_runs(trace: Trace) -> tuple[list[list], int]:
    """The runs of consecutive samples the fault left alone, and how many samples it took."""
    runs, prev, taken = [], 0, 0
    for a, b in episodes(trace):
        runs.append(list(trace[prev:a]))
        taken += b - a
        prev = b
    runs.append(list(trace[prev:]))
    return [r for r in runs if r], taken


def spans(trace: Trace) -> list[tuple[float, float]]:
    """Each fault's time span: its first sample's time to the time of the sample that ends it (or of the
    trace's last sample)."""
    return [(trace[a][0], trace[min(b, len(trace) - 1)][0]) for a, b in episodes(trace)]
