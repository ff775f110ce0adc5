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

SEC("struct_ops")
__u32 BPF_PROG(ccrig_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = ccrig_tp(sk);
	struct ccrig_ca *ca = ccrig_ca(sk);
	struct ccrig_params p = ccrig_params;
	__u32 w = tp->snd_cwnd;

	/* A window of CCRIG_CAP_SEGS or more is no path's: it is what the kernel made of a garbage ssthresh when
	 * it skipped this program at an earlier loss (tcp_modules/bpf_fault.py). The law applied to it would
	 * saturate and take some 20 losses to halve back; apply it to the window of the last loss it saw instead. */
	if (w >= CCRIG_CAP_SEGS && ca->loss_cwnd && ca->loss_cwnd < CCRIG_CAP_SEGS)
		w = ca->loss_cwnd;
	ca->loss_cwnd = w;
	return ccrig_on_loss(&p, w, &ca->acc, &ca->seen_loss);
}

SEC("struct_ops")
__u32 BPF_PROG(ccrig_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = ccrig_tp(sk);
	__u32 lc = ccrig_ca(sk)->loss_cwnd;

	return tp->snd_cwnd > lc ? tp->snd_cwnd : lc;
}

#endif
