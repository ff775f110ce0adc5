// SPDX-License-Identifier: GPL-2.0
/* Polynomial (generalised binomial) rules as a BPF congestion control: the law is stated in
 * ../include/ccrig_law.h. Defaults are Table 1's AIMD row (k = 0, l = 1, one term, alpha = 1, beta = 1/2);
 * halve_first off; the loader patches the parameters and the name per variant. */
#define CCRIG_DEFAULT_PARAMS { .magic = CCRIG_MAGIC, .alpha = CCRIG_ONE, .beta = CCRIG_ONE / 2, \
	.k = 0, .l = 1, .terms = 1, .per_ack = 0, .law = CCRIG_LAW_POLY, .halve_first = 0 }
#include "ccrig_tcp.bpf.h"

SEC(".struct_ops")
struct tcp_congestion_ops ccrig_poly = {
	.init = (void *)ccrig_init,
	.ssthresh = (void *)ccrig_ssthresh,
	.cong_avoid = (void *)ccrig_cong_avoid,
	.undo_cwnd = (void *)ccrig_undo_cwnd,
	/* 15 characters, replaced by the generated name: the loader finds it by this text */
	.name = "ccrig@po@templ@",
};
