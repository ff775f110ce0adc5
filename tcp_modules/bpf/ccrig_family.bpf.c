// SPDX-License-Identifier: GPL-2.0
/* One family's law as a BPF congestion control: built once per family (the Makefile defines CCRIG_LAW_FILE,
 * its C law under ../families/), the law being stated there and the core in ../include/ccrig_law.h.
 * The defaults are placeholders: the loader patches the parameters and the name per variant. */
#define CCRIG_DEFAULT_PARAMS { .magic = CCRIG_MAGIC, .alpha = CCRIG_ONE, .beta = CCRIG_ONE / 2, \
	.k = 0, .l = 1, .terms = 1, .per_ack = 0, .law = 0, .halve_first = 0 }
#include "ccrig_tcp.bpf.h"

SEC(".struct_ops")
struct tcp_congestion_ops ccrig_ops = {
	.init = (void *)ccrig_init,
	.ssthresh = (void *)ccrig_ssthresh,
	.cong_avoid = (void *)ccrig_cong_avoid,
	.undo_cwnd = (void *)ccrig_undo_cwnd,
	.in_ack_event = (void *)ccrig_in_ack_event,
	/* 15 characters, replaced by the generated name: the loader finds it by this text */
	.name = "ccrig@variant@@",
};
