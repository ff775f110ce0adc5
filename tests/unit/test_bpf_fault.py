"""The kernel's BPF struct_ops fault found in a TCP_INFO trace (tcp_modules/bpf_fault.py), on traces shaped like
the ones seen (tests/host/bpf_fault_repro.py): a loss sets ssthresh to 2183157349, PRR grows cwnd to ~10^9, and
later losses halve the garbage threshold until congestion avoidance resumes."""
from ccrig.tcp_modules import bpf_fault

OPEN, RECOVERY, LOSS = 0, 3, 4
GARBAGE = 2183157349   # srso_return_thunk + 5 on the machine where it was seen


def trace(*states):
    return [(i * 0.01, {"ca_state": st, "snd_ssthresh": ss, "snd_cwnd": cwnd}) for i, (st, ss, cwnd) in enumerate(states)]


def test_one_sample_is_hit_by_a_window_or_threshold_no_law_reaches():
    assert not bpf_fault.hit({"snd_ssthresh": 12, "snd_cwnd": 25})
    assert not bpf_fault.hit({"snd_ssthresh": bpf_fault.INFINITE_SSTHRESH, "snd_cwnd": 10})   # before the first loss
    assert bpf_fault.hit({"snd_ssthresh": GARBAGE, "snd_cwnd": 25})
    assert bpf_fault.hit({"snd_ssthresh": 1 << 24, "snd_cwnd": 25})   # a law's saturation: no real window
    # the kernel reports a garbage ssthresh above its infinity as infinite; the window gives it away
    assert bpf_fault.hit({"snd_ssthresh": bpf_fault.INFINITE_SSTHRESH, "snd_cwnd": 174652610})
    assert not bpf_fault.hit({})   # a sample without the fields (not a TCP socket's) is no evidence


def test_a_clean_trace_is_one_run():
    t = trace((OPEN, bpf_fault.INFINITE_SSTHRESH, 10), (OPEN, 12, 24), (RECOVERY, 12, 20), (OPEN, 12, 13))
    assert bpf_fault.episodes(t) == []
    assert bpf_fault.clean_runs(t) == ([t], 0)
    assert bpf_fault.spans(t) == []


def test_the_fault_and_its_aftermath_are_cut_out_until_congestion_avoidance():
    t = trace((OPEN, 12, 25), (OPEN, 12, 25),
              (RECOVERY, GARBAGE, 174652610), (RECOVERY, GARBAGE, 960589247),   # the fault, PRR
              (RECOVERY, 1047915528, 10), (RECOVERY, 523957764, 34),          # losses halve it
              (LOSS, 40, 1), (OPEN, 40, 12),                                   # a sane threshold, slow start
              (OPEN, 40, 41), (OPEN, 40, 42), (RECOVERY, 21, 30), (OPEN, 21, 21))
    assert bpf_fault.episodes(t) == [(2, 8)]
    runs, excluded = bpf_fault.clean_runs(t)
    assert runs == [t[:2], t[8:]] and excluded == 6
    assert bpf_fault.spans(t) == [(0.02, 0.08)]


def test_a_fault_at_the_end_or_the_start_and_two_faults():
    end = trace((OPEN, 12, 25), (RECOVERY, GARBAGE, 1 << 28))
    assert bpf_fault.clean_runs(end) == ([end[:1]], 1)
    assert bpf_fault.spans(end) == [(0.01, 0.01)]
    two = trace((RECOVERY, GARBAGE, 1 << 28), (OPEN, 12, 13), (OPEN, 12, 14),
                (OPEN, 1069747086, 1069747086), (OPEN, 25, 26))
    assert bpf_fault.episodes(two) == [(0, 1), (3, 4)]
    assert bpf_fault.clean_runs(two) == ([two[1:3], two[4:]], 2)


def test_congestion_avoidance_at_a_threshold_the_path_never_had_is_still_the_faults():
    # CI at d4b0157, poly_piad (a decrease of a few segments a loss) on a path holding 48: after the fault one
    # Open sample at cwnd = ssthresh = 298, then Recovery for the rest of the flow, ssthresh falling by 2 a loss
    t = trace((OPEN, bpf_fault.INFINITE_SSTHRESH, 46), (RECOVERY, 44, 30), (OPEN, 38, 40),
              (RECOVERY, GARBAGE, 1 << 28), (OPEN, 298, 298), (RECOVERY, 296, 40), (RECOVERY, 210, 37))
    assert bpf_fault.episodes(t) == [(3, 7)]
    # it ends at congestion avoidance within twice the largest Open window before it (2 x 46 here)
    back = t + trace((OPEN, 93, 93), (OPEN, 92, 92), (OPEN, 92, 93))
    assert bpf_fault.episodes(back) == [(3, 8)]
    assert bpf_fault.clean_runs(back) == ([back[:3], back[8:]], 5)
