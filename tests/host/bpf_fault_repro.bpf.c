// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's own reno (net/ipv4/tcp_cong.c) as a BPF struct_ops congestion control, with counters, to tell
 * the kernel's BPF struct_ops fault (tcp_modules/bpf_fault.py) from anything a law does: tests/host/bpf_fault_repro.py
 * builds, registers and drives it.
 *
 * ssthresh = max(cwnd >> 1, 2), cong_avoid = the kernel's tcp_reno_cong_avoid, undo_cwnd = max(cwnd, cwnd at
 * the loss). set_state, called by the kernel right after ssthresh whenever it enters CWR, Recovery or Loss,
 * checks that tp->snd_ssthresh is what ssthresh returned: when the program ran, the kernel stored its value.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

struct repro_ca {
	__u32 ret;        /* what ssthresh last returned */
	__u32 called;     /* ssthresh ran since the last set_state */
	__u32 loss_cwnd;
};

/* read by the driver (bpftool map dump) */
__u64 n_ssthresh, n_reductions, n_mismatch, n_garbage, last_bad;

static __always_inline struct repro_ca *ca_of(struct sock *sk)
{
	return (struct repro_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

SEC("struct_ops")
void BPF_PROG(repro_init, struct sock *sk)
{
	struct repro_ca *ca = ca_of(sk);

	ca->ret = 0;
	ca->called = 0;
	ca->loss_cwnd = 0;
}

SEC("struct_ops")
__u32 BPF_PROG(repro_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct repro_ca *ca = ca_of(sk);
	__u32 r = tp->snd_cwnd >> 1;

	if (r < 2)
		r = 2;
	ca->ret = r;
	ca->called = 1;
	ca->loss_cwnd = tp->snd_cwnd;
	__sync_fetch_and_add(&n_ssthresh, 1);
	return r;
}

SEC("struct_ops")
void BPF_PROG(repro_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(repro_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 lc = ca_of(sk)->loss_cwnd;

	return tp->snd_cwnd > lc ? tp->snd_cwnd : lc;
}

SEC("struct_ops")
void BPF_PROG(repro_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct repro_ca *ca = ca_of(sk);
	__u32 ss = tp->snd_ssthresh;

	if (new_state != TCP_CA_CWR && new_state != TCP_CA_Recovery && new_state != TCP_CA_Loss)
		return;
	__sync_fetch_and_add(&n_reductions, 1);
	if (ss >= (1U << 24) && ss != 0x7fffffff) {
		__sync_fetch_and_add(&n_garbage, 1);
		last_bad = ss;
	}
	if (ca->called && ss != ca->ret) {
		__sync_fetch_and_add(&n_mismatch, 1);
		last_bad = ss;
	}
	ca->called = 0;
}

SEC(".struct_ops")
struct tcp_congestion_ops ccrig_repro = {
	.init = (void *)repro_init,
	.ssthresh = (void *)repro_ssthresh,
	.cong_avoid = (void *)repro_cong_avoid,
	.undo_cwnd = (void *)repro_undo_cwnd,
	.set_state = (void *)repro_set_state,
	.name = "ccrig_repro",
};
