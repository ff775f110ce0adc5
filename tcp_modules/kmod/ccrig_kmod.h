/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel-module glue around the fixed-point core (../include/ccrig_law.h), shared by every family's
 * module (tcp_NAME.c, which ../families/gen.py writes from the family's descriptor): each ops struct is
 * embedded with its parameters, so one set of callbacks serves every preset; the runtime-tunable instance
 * copies the module parameters at connection start. The includer defines CCRIG_LAW_FILE.
 * Builds against kernel headers >= 5.10 (tcp_snd_cwnd() appeared in 5.19: provided here before that).
 */
#ifndef CCRIG_KMOD_H
#define CCRIG_KMOD_H

#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/version.h>
#include <net/tcp.h>

#define CCRIG_DIV64(a, b) div64_u64((a), (b))
#include "../include/ccrig_law.h"

#if LINUX_VERSION_CODE < KERNEL_VERSION(5, 19, 0)
static inline u32 tcp_snd_cwnd(const struct tcp_sock *tp) { return tp->snd_cwnd; }
static inline void tcp_snd_cwnd_set(struct tcp_sock *tp, u32 val) { tp->snd_cwnd = val; }
#endif

struct ccrig_variant {
	struct tcp_congestion_ops ops;
	struct ccrig_params params;
	struct ccrig_params *live;  /* non-NULL for the tunable instance: read at connection start */
};

static inline struct ccrig_ca *ccrig_ca(struct sock *sk)
{
	BUILD_BUG_ON(sizeof(struct ccrig_ca) > ICSK_CA_PRIV_SIZE);
	return inet_csk_ca(sk);
}

static void ccrig_init(struct sock *sk)
{
	const struct ccrig_variant *v =
		container_of(inet_csk(sk)->icsk_ca_ops, struct ccrig_variant, ops);
	struct ccrig_ca *ca = ccrig_ca(sk);

	if (v->live) {
		/* params may be rewritten through sysfs at any time: take one consistent-enough copy */
		ca->p.alpha = READ_ONCE(v->live->alpha);
		ca->p.beta = READ_ONCE(v->live->beta);
		ca->p.k = READ_ONCE(v->live->k);
		ca->p.l = READ_ONCE(v->live->l);
		ca->p.terms = READ_ONCE(v->live->terms);
		ca->p.per_ack = READ_ONCE(v->live->per_ack);
		ca->p.halve_first = READ_ONCE(v->live->halve_first);
		ca->p.law = v->params.law;
	} else {
		ca->p = v->params;
	}
	ca->acc = 0;
	ca->loss_cwnd = 0;
	ca->seen_loss = 0;
}

static void ccrig_cong_avoid(struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccrig_ca *ca = ccrig_ca(sk);
	u32 cwnd;

#ifdef CCRIG_LAW_WINDOW
	/* a law with a window of its own (families/generic.h) holds it in every state: no slow start at the start
	 * nor after a timeout, which left one packet in flight (tcp_enter_loss); the timeout's first ACK restores it.
	 * The kernel calls this in the Loss state too (tcp_cong_control: not a cwnd reduction) */
	tcp_snd_cwnd_set(tp, min_t(u32, CCRIG_LAW_WINDOW(&ca->p), tp->snd_cwnd_clamp));
	return;
#endif
	if (!tcp_is_cwnd_limited(sk))
		return;
	/* slow start until the first loss, as in Reno */
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cwnd = ccrig_on_ack(&ca->p, tcp_snd_cwnd(tp), acked, &ca->acc);
	tcp_snd_cwnd_set(tp, min(cwnd, tp->snd_cwnd_clamp));
}

static u32 ccrig_ssthresh(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct ccrig_ca *ca = ccrig_ca(sk);

	ca->loss_cwnd = tcp_snd_cwnd(tp);
	return ccrig_on_loss(&ca->p, tcp_snd_cwnd(tp), &ca->acc, &ca->seen_loss);
}

static u32 ccrig_undo_cwnd(struct sock *sk)
{
	return max(tcp_snd_cwnd(tcp_sk(sk)), ccrig_ca(sk)->loss_cwnd);
}

#define CCRIG_OPS(_name) {                         \
	.init = ccrig_init,                        \
	.ssthresh = ccrig_ssthresh,                \
	.cong_avoid = ccrig_cong_avoid,            \
	.undo_cwnd = ccrig_undo_cwnd,              \
	.owner = THIS_MODULE,                      \
	.name = _name,                             \
}

/* A rational constant in Q20, rounded to nearest as laws.quantize() rounds */
#define CCRIG_Q(num, den) ((((u64)(num) << CCRIG_FP) + (den) / 2) / (den))

/* Module parameters as decimals ("0.3125"), held in Q20: the kernel has no floating point. Inline, so a
 * family without a real parameter leaves them unused without a warning. */
static inline int ccrig_parse_q20(const char *val, u64 *out)
{
	u64 ip = 0, fp = 0, scale = 1;
	const char *s = val;
	int digits = 0;

	if (!*s || *s == '\n')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		ip = ip * 10 + (*s - '0');
		if (ip > 1000)
			return -ERANGE;
	}
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (digits < 9) {
				fp = fp * 10 + (*s - '0');
				scale *= 10;
				digits++;
			}
		}
	}
	if (*s && *s != '\n')
		return -EINVAL;
	*out = (ip << CCRIG_FP) + div64_u64((fp << CCRIG_FP) + scale / 2, scale);
	return 0;
}

/* A real parameter within [lo, hi] in Q20, either end excluded when open: the family's declared range */
static inline int ccrig_set_real(const char *val, const struct kernel_param *kp, u64 lo, u64 hi, bool lo_open,
				 bool hi_open)
{
	u64 q;
	int err = ccrig_parse_q20(val, &q);

	if (err)
		return err;
	if ((lo_open ? q <= lo : q < lo) || (hi_open ? q >= hi : q > hi))
		return -ERANGE;
	WRITE_ONCE(*(u64 *)kp->arg, q);
	return 0;
}

static inline int ccrig_param_get_q20(char *buf, const struct kernel_param *kp)
{
	u64 q = READ_ONCE(*(u64 *)kp->arg);
	u64 frac = div64_u64((q & (CCRIG_ONE - 1)) * 1000000ULL + CCRIG_ONE / 2, CCRIG_ONE);

	if (frac >= 1000000ULL) {
		frac -= 1000000ULL;
		q += CCRIG_ONE;
	}
	return sysfs_emit(buf, "%llu.%06llu\n", q >> CCRIG_FP, frac);
}

/* An integer parameter (or a flag: 0..1) within [lo, hi] */
static inline int ccrig_set_int(const char *val, const struct kernel_param *kp, int lo, int hi)
{
	int v, err = kstrtoint(val, 0, &v);

	if (err)
		return err;
	if (v < lo || v > hi)
		return -ERANGE;
	WRITE_ONCE(*(int *)kp->arg, v);
	return 0;
}

#endif
