/* SPDX-License-Identifier: GPL-2.0 */
/*
 * poly.h — the polynomial (generalised binomial) law (Chandrasekaran & Wahida Banu, Eq. 2-4, Table 1), m = terms:
 *     no loss in an RTT:  W <- W + sum_{n=1..m} (alpha / W)^(n k)
 *     loss indication:    W <- max(W - sum_{n=1..m} (beta * W)^(n l), 2)
 *   m = 1 is the paper's "MIMD model", m = 2 its "PIPD model". Here beta is the fraction REMOVED (their
 *   Eq. 1 writes AIMD's decrease as (1 - beta) W), the opposite convention to TCP(alpha, beta).
 *   The decrease can exceed W (e.g. l = 1, m = 2: beta W + (beta W)^2 > W as soon as W > (1-beta)/beta^2),
 *   so the window is floored at 2 segments (the core does). Their ns-2 text applies the increase "for each
 *   new acknowledgement": per_ack = 1, and halves the window at the first congestion indication:
 *   halve_first = 1; both are the core's (../include/ccrig_law.h).
 *
 * Included by the core, which defines the arithmetic used here. Parameters, presets and the reference are
 * poly.py's; the vectors in poly.vectors.json check this file.
 */
#ifndef CCRIG_FAMILY_POLY_H
#define CCRIG_FAMILY_POLY_H

#define CCRIG_EXP_MAX 3    /* |k|, |l| <= 3: poly.py's EXP_MAX */
#define CCRIG_TERMS_MAX 4  /* poly.py's TERMS_MAX */

/* x^e in Q20, 0 <= e <= CCRIG_EXP_MAX (a bounded loop the BPF verifier accepts) */
static inline u64 ccrig_pow(u64 x, u32 e)
{
	u64 r = CCRIG_ONE;
	u32 i;

	for (i = 0; i < CCRIG_EXP_MAX; i++) {
		if (i >= e)
			break;
		r = ccrig_mul(r, x);
	}
	return r;
}

/* sum_{n=1..m} t^n in Q20 */
static inline u64 ccrig_series(u64 t, u32 m)
{
	u64 s = 0, p = CCRIG_ONE;
	u32 n;

	for (n = 0; n < CCRIG_TERMS_MAX; n++) {
		if (n >= m)
			break;
		p = ccrig_mul(p, t);
		s = ccrig_sat_add(s, p);
	}
	return s;
}

/* sum_{n=1..m} base^(n e) for a signed exponent e: base^-1 is computed as 1/base */
static inline u64 ccrig_poly_sum(u64 base, s32 e, u32 m)
{
	u32 ae = e < 0 ? (u32)(-e) : (u32)e;

	if (e < 0)
		base = ccrig_div(CCRIG_ONE, base);
	return ccrig_series(ccrig_pow(base, ae), m);
}

/* I(W): the increase per RTT in Q20, for a window of w segments (w >= 1) */
static inline u64 ccrig_law_increase(const struct ccrig_params *p, u32 w)
{
	/* (alpha / W)^k for k < 0 is (W / alpha)^-k: divide that way round, 1/(alpha/W) would lose digits */
	if (p->k < 0)
		return ccrig_series(ccrig_pow(ccrig_div((u64)w << CCRIG_FP, p->alpha), (u32)(-p->k)), p->terms);
	return ccrig_poly_sum(CCRIG_DIV64(p->alpha, (u64)w), p->k, p->terms);
}

/* The window after a loss at w in Q20, before the core's floor: W - D(W), or 0 when D(W) exceeds W */
static inline u64 ccrig_law_loss_window(const struct ccrig_params *p, u32 w)
{
	/* beta * W in Q20, exact */
	u64 bw = p->beta * (u64)w, wq = (u64)w << CCRIG_FP;
	u64 d = ccrig_poly_sum(bw > CCRIG_CAP ? CCRIG_CAP : bw, p->l, p->terms);

	return wq > d ? wq - d : 0;
}

#endif
