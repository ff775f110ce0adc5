/* SPDX-License-Identifier: GPL-2.0 */
/*
 * alphabeta.h — TCP(alpha, beta), the GAIMD law (Yang & Lam; Mamatas & Tsaoussidis §2):
 *     no loss in an RTT:  W <- W + alpha                       alpha > 0 segments per RTT
 *     loss indication:    W <- max(beta * W, 2)                0 < beta < 1, the fraction KEPT
 *   the "friendly" form derives alpha = 4 (1 - beta^2) / 3 from beta (their Eq. 3; done in Python, not here).
 *
 * Included by the core (../include/ccrig_law.h), which floors the window at 2 segments and spreads the
 * increase over a window of acknowledged segments. Parameters, presets and the reference are alphabeta.py's.
 */
#ifndef CCRIG_FAMILY_ALPHABETA_H
#define CCRIG_FAMILY_ALPHABETA_H

/* I(W): alpha segments per RTT, whatever the window */
static inline u64 ccrig_law_increase(const struct ccrig_params *p, u32 w)
{
	(void)w;
	return p->alpha;
}

/* beta * W in Q20 */
static inline u64 ccrig_law_loss_window(const struct ccrig_params *p, u32 w)
{
	return ccrig_mul(p->beta, (u64)w << CCRIG_FP);
}

#endif
