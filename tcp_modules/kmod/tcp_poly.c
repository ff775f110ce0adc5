// SPDX-License-Identifier: GPL-2.0
/*
 * tcp_poly — polynomial (generalised binomial) congestion control, Chandrasekaran & Wahida Banu Eq. 2-4.
 *
 *   no loss in an RTT:  cwnd += sum_{n=1..m} (alpha / cwnd)^(n k)
 *   loss indication:    cwnd = ssthresh = max(cwnd - sum_{n=1..m} (beta * cwnd)^(n l), 2)
 *
 * m = terms (1: the paper's "MIMD model", 2: its "PIPD model"); beta is the fraction removed (their Eq. 1).
 * The decrease can exceed the window: it is floored at 2 segments. The increase is spread over a window of
 * acknowledged segments (per RTT), or with per_ack=1 added per acknowledged segment as the paper's ns-2 text
 * reads. With halve_first=1 the connection's first loss halves the window instead (their ns-2 text: "upon
 * the first congestion indication, the congestion window size is cut in half"), later ones follow the
 * decrease rule. Slow start until the first loss and the reaction to a retransmission timeout are Reno's.
 * The arithmetic is ../include/ccrig_law.h, shared with the BPF build and checked against the Python reference.
 *
 * Registers every row of Table 1 with alpha = 1, beta = 1/2 (the paper gives no numbers; this makes
 * poly_aimd exactly Reno): poly_aimd (k 0, l 1), poly_mimd (-1, 1), poly_miad (-1, 0), poly_aiad (0, 0),
 * one term each; poly_aiad2 (0, 0), poly_pipd (1, 1), poly_aipd (0, 1), poly_piad (1, 0), two terms each;
 * the paper's two models with numbers under which they behave as its simulations report, halving at the
 * first loss (the reasoning is in ../laws.py): poly_mimd_paper (k -1, l 1, one term, alpha 10, beta 1/2)
 * and poly_pipd_paper (k 1, l 1, two terms, alpha 20, beta 1/10: after any loss at most 20.25 segments);
 * and poly_param, whose parameters are the module parameters below (writable at runtime through
 * /sys/module/tcp_poly/parameters/; a connection takes the values in force when it starts).
 */
#include "ccrig_kmod.h"

static struct ccrig_params poly_live = {
	.alpha = CCRIG_ONE, .beta = CCRIG_ONE / 2, .k = 0, .l = 1, .terms = 1, .law = CCRIG_LAW_POLY,
};

static int ccrig_set_range(const char *val, const struct kernel_param *kp, int lo, int hi)
{
	int v, err = kstrtoint(val, 0, &v);

	if (err)
		return err;
	if (v < lo || v > hi)
		return -ERANGE;
	WRITE_ONCE(*(int *)kp->arg, v);
	return 0;
}

static int ccrig_set_exp(const char *val, const struct kernel_param *kp)
{
	return ccrig_set_range(val, kp, -CCRIG_EXP_MAX, CCRIG_EXP_MAX);
}

static int ccrig_set_terms(const char *val, const struct kernel_param *kp)
{
	return ccrig_set_range(val, kp, 1, CCRIG_TERMS_MAX);
}

static int ccrig_set_flag(const char *val, const struct kernel_param *kp)
{
	return ccrig_set_range(val, kp, 0, 1);
}

static const struct kernel_param_ops ccrig_exp_ops = { .set = ccrig_set_exp, .get = param_get_int };
static const struct kernel_param_ops ccrig_terms_ops = { .set = ccrig_set_terms, .get = param_get_uint };
static const struct kernel_param_ops ccrig_flag_ops = { .set = ccrig_set_flag, .get = param_get_uint };

module_param_cb(alpha, &ccrig_alpha_ops, &poly_live.alpha, 0644);
MODULE_PARM_DESC(alpha, "poly_param: alpha of the increase (alpha/W)^k, decimal, 0 < alpha <= 1000 (default 1)");
module_param_cb(beta, &ccrig_beta_ops, &poly_live.beta, 0644);
MODULE_PARM_DESC(beta, "poly_param: beta of the decrease (beta W)^l, decimal, 0 < beta < 1 (default 0.5)");
module_param_cb(k, &ccrig_exp_ops, &poly_live.k, 0644);
MODULE_PARM_DESC(k, "poly_param: increase exponent, -3..3 (default 0)");
module_param_cb(l, &ccrig_exp_ops, &poly_live.l, 0644);
MODULE_PARM_DESC(l, "poly_param: decrease exponent, -3..3 (default 1)");
module_param_cb(terms, &ccrig_terms_ops, &poly_live.terms, 0644);
MODULE_PARM_DESC(terms, "poly_param: number of polynomial terms m, 1..4 (default 1)");
module_param_cb(per_ack, &ccrig_flag_ops, &poly_live.per_ack, 0644);
MODULE_PARM_DESC(per_ack, "poly_param: 1 adds the increase per acknowledged segment instead of per RTT (default 0)");
module_param_cb(halve_first, &ccrig_flag_ops, &poly_live.halve_first, 0644);
MODULE_PARM_DESC(halve_first, "poly_param: 1 halves the window at a connection's first loss, the decrease rule "
		 "after (default 0)");

#define POLY(_name, _k, _l, _m) {                                               \
	.ops = CCRIG_OPS(_name),                                                \
	.params = { .alpha = CCRIG_ONE, .beta = CCRIG_ONE / 2, .k = (_k), .l = (_l), \
		    .terms = (_m), .law = CCRIG_LAW_POLY },                     \
}

/* alpha and beta as rationals (CCRIG_Q), and the first-loss halving */
#define POLY_PAPER(_name, _k, _l, _m, _an, _ad, _bn, _bd) {                     \
	.ops = CCRIG_OPS(_name),                                                \
	.params = { .alpha = CCRIG_Q(_an, _ad), .beta = CCRIG_Q(_bn, _bd), .k = (_k), \
		    .l = (_l), .terms = (_m), .law = CCRIG_LAW_POLY, .halve_first = 1 }, \
}

static struct ccrig_variant poly_variants[] = {
	POLY("poly_aimd", 0, 1, 1),
	POLY("poly_mimd", -1, 1, 1),
	POLY("poly_miad", -1, 0, 1),
	POLY("poly_aiad", 0, 0, 1),
	POLY("poly_aiad2", 0, 0, 2),
	POLY("poly_pipd", 1, 1, 2),
	POLY("poly_aipd", 0, 1, 2),
	POLY("poly_piad", 1, 0, 2),
	POLY_PAPER("poly_mimd_paper", -1, 1, 1, 10, 1, 1, 2),
	POLY_PAPER("poly_pipd_paper", 1, 1, 2, 20, 1, 1, 10),
	{ .ops = CCRIG_OPS("poly_param"), .params = { .law = CCRIG_LAW_POLY }, .live = &poly_live },
};

#define CCRIG_VARIANTS poly_variants
#include "ccrig_register.h"

module_init(ccrig_register);
module_exit(ccrig_unregister);

MODULE_AUTHOR("ccrig");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Polynomial congestion control: poly_aimd, poly_mimd, poly_miad, poly_aiad, poly_aiad2, "
		   "poly_pipd, poly_aipd, poly_piad, poly_mimd_paper, poly_pipd_paper, poly_param");
