/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The struct_ops glue around the fixed-point core (../include/ccrig_law.h): Reno's slow start and
 * cwnd-limited test, then the core's increase in congestion avoidance and its decrease in ssthresh.
 * Included by ccrig_family.bpf.c, which gives the default parameters and the ops.
 *
 * Each variant is this object with `ccrig_params` (.rodata, found by its magic number) and the ops' name
 * patched by the loader (tcp_modules/bpfobj.py), so any parameterisation registers without a compiler.
 */
#ifndef CCRIG_TCP_BPF_H
#define CCRIG_TCP_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../include/ccrig_law.h"

char _license[] SEC("license") = "GPL";

/* kfuncs the kernel exports to BPF congestion controls (net/ipv4/bpf_tcp_ca.c) */
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

/* patched per variant; const volatile so the verifier sees the values and bounds the loops */
const volatile struct ccrig_params ccrig_params = CCRIG_DEFAULT_PARAMS;

static __always_inline struct tcp_sock *ccrig_tp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct ccrig_ca *ccrig_ca(struct sock *sk)
{
	return (struct ccrig_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* include/net/tcp.h tcp_is_cwnd_limited(), which BPF cannot call */
static __always_inline bool ccrig_cwnd_limited(struct tcp_sock *tp)
{
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return tp->is_cwnd_limited;
}

SEC("struct_ops")
void BPF_PROG(ccrig_init, struct sock *sk)
{
	struct ccrig_ca *ca = ccrig_ca(sk);

	ca->p = ccrig_params;
	ca->acc = 0;
	ca->loss_cwnd = 0;
	ca->seen_loss = 0;
}

SEC("struct_ops")
void BPF_PROG(ccrig_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = ccrig_tp(sk);
	struct ccrig_ca *ca = ccrig_ca(sk);
	struct ccrig_params p = ccrig_params;
	__u32 cwnd;

#ifdef CCRIG_LAW_WINDOW
	/* a law with a window of its own holds it in every state, as the module's glue does (kmod/ccrig_kmod.h) */
	cwnd = CCRIG_LAW_WINDOW(&p);
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
	return;
#endif
	if (!ccrig_cwnd_limited(tp))
		return;
	if (tp->snd_cwnd < tp->snd_ssthresh) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cwnd = ccrig_on_ack(&p, tp->snd_cwnd, acked, &ca->acc);
	tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
}

/* The law's decrease at a loss with window w, as ssthresh returns it; its state (loss_cwnd, acc, seen_loss) moves. */
static __always_inline __u32 ccrig_decrease(struct sock *sk, __u32 w)
{
	struct ccrig_ca *ca = ccrig_ca(sk);
	struct ccrig_params p = ccrig_params;

	/* A window of CCRIG_CAP_SEGS or more is no path's: it is what the kernel made of a garbage ssthresh when
	 * it skipped the law at an earlier loss (tcp_modules/bpf_fault.py). The law applied to it would
	 * saturate and take some 20 losses to halve back; apply it to the window of the last loss it saw instead. */
	if (w >= CCRIG_CAP_SEGS && ca->loss_cwnd && ca->loss_cwnd < CCRIG_CAP_SEGS)
		w = ca->loss_cwnd;
	ca->loss_cwnd = w;
	return ccrig_on_loss(&p, w, &ca->acc, &ca->seen_loss);
}

#ifdef CCRIG_TEST_SKIP_EVERY
/* Tests only (tests/host/test_bpf_repair.py builds with it): every CCRIG_TEST_SKIP_EVERY-th call returns what a
 * skipped program leaves (the return thunk's address seen on this project's machine) and moves no state. */
__u64 ccrig_test_calls = 0;
#define CCRIG_TEST_GARBAGE 2183157349U
#endif

SEC("struct_ops")
__u32 BPF_PROG(ccrig_ssthresh, struct sock *sk)
{
#ifdef CCRIG_TEST_SKIP_EVERY
	if (++ccrig_test_calls % CCRIG_TEST_SKIP_EVERY == 0)
		return CCRIG_TEST_GARBAGE;
#endif
	return ccrig_decrease(sk, ccrig_tp(sk)->snd_cwnd);
}

#define CCRIG_INFINITE_SSTHRESH 0x7fffffffU   /* include/net/tcp.h TCP_INFINITE_SSTHRESH, not in vmlinux.h */

/* Thresholds put right by ccrig_in_ack_event (read by tcp_modules/bpf.py repaired()). */
__u64 ccrig_repaired = 0;

/* When the kernel skips the law's ssthresh (bpf_fault.py) it also skips every program of ours in the same
 * softirq (set_state, cwnd_event), so the repair waits for the next ACK, which the kernel hands here on its
 * way in, in every state and before it leaves Recovery (tcp_ack: tcp_in_ack_event, then tcp_fastretrans_alert,
 * whose end of the reduction sets cwnd = ssthresh). The threshold is what the skipped call should have
 * returned: the law's decrease at prior_cwnd, the window the kernel saved just before calling it
 * (tcp_init_cwnd_reduction, tcp_enter_loss). A window already set from the garbage is no path's either: PRR
 * reads the garbage as a negative int and sizes the window from it at the very ACK that entered Recovery (what
 * that ACK sends is sent); it becomes that threshold, as the reduction's end would have made it. */
SEC("struct_ops")
void BPF_PROG(ccrig_in_ack_event, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = ccrig_tp(sk);
	__u32 ss = tp->snd_ssthresh;

	if (ss < CCRIG_CAP_SEGS || ss == CCRIG_INFINITE_SSTHRESH)
		return;
	ss = ccrig_decrease(sk, tp->prior_cwnd);
	tp->snd_ssthresh = ss;
	if (tp->snd_cwnd >= CCRIG_CAP_SEGS)
		tp->snd_cwnd = ss;
	__sync_fetch_and_add(&ccrig_repaired, 1);
}

SEC("struct_ops")
__u32 BPF_PROG(ccrig_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = ccrig_tp(sk);
	__u32 lc = ccrig_ca(sk)->loss_cwnd;

	return tp->snd_cwnd > lc ? tp->snd_cwnd : lc;
}

#endif
