// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_alphabeta — TCP(alpha, beta) (GAIMD) congestion control.
 *
 *   no loss in an RTT:  cwnd += alpha               (alpha/cwnd per acknowledged segment, in fixed point)
 *   loss indication:    cwnd = ssthresh = max(beta * cwnd, 2)      beta = the fraction kept
 *
 * Slow start until the first loss and the reaction to a retransmission timeout are Reno's. The arithmetic
 * is ../include/ccrig_law.h, shared with the BPF build and checked against the Python reference.
 *
 * Registers the presets of Mamatas & Tsaoussidis §3.1 — ab_standard TCP(1, 1/2), ab_responsive
 * TCP(1.25, 1/4), ab_smooth TCP(0.31, 7/8) — and ab_param, whose alpha and beta are the module parameters
 * below (writable at runtime through /sys/module/tcp_alphabeta/parameters/; a connection takes the values
 * in force when it starts).
 */
#include "ccrig_kmod.h"

static struct ccrig_params ab_live = {
	.alpha = CCRIG_ONE, .beta = CCRIG_ONE / 2, .terms = 1, .law = CCRIG_LAW_AB,
};

module_param_cb(alpha, &ccrig_alpha_ops, &ab_live.alpha, 0644);
MODULE_PARM_DESC(alpha, "ab_param: increase per RTT in segments, decimal, 0 < alpha <= 1000 (default 1)");
module_param_cb(beta, &ccrig_beta_ops, &ab_live.beta, 0644);
MODULE_PARM_DESC(beta, "ab_param: fraction of the window kept on a loss, decimal, 0 < beta < 1 (default 0.5)");

#define AB(_name, _alpha, _beta) {                                              \
	.ops = CCRIG_OPS(_name),                                                \
	.params = { .alpha = (_alpha), .beta = (_beta), .terms = 1, .law = CCRIG_LAW_AB }, \
}

static struct ccrig_variant ab_variants[] = {
	AB("ab_standard", CCRIG_ONE, CCRIG_Q(1, 2)),
	AB("ab_responsive", CCRIG_Q(5, 4), CCRIG_Q(1, 4)),
	AB("ab_smooth", CCRIG_Q(31, 100), CCRIG_Q(7, 8)),
	{ .ops = CCRIG_OPS("ab_param"), .params = { .law = CCRIG_LAW_AB }, .live = &ab_live },
};

#define CCRIG_VARIANTS ab_variants
#include "ccrig_register.h"

module_init(ccrig_register);
module_exit(ccrig_unregister);

MODULE_AUTHOR("ccrig");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TCP(alpha, beta) congestion control: ab_standard, ab_responsive, ab_smooth, ab_param");
