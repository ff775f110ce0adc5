/* SPDX-License-Identifier: GPL-2.0 */
/*
 * generic.h — Keshav's Generic flow control: a constant window W (`window`, in the unsigned slot `terms`).
 *     no loss:            W unchanged
 *     loss indication:    W unchanged
 * CCRIG_LAW_WINDOW asks the glue to hold W in every state, slow start and a timeout's Loss state included
 * (Linux leaves one packet in flight at a timeout; the first ACK after it restores W). Parameters, presets and
 * the reference are generic.py's.
 */
#ifndef CCRIG_FAMILY_GENERIC_H
#define CCRIG_FAMILY_GENERIC_H

#define CCRIG_LAW_WINDOW(p) ((p)->terms)

static inline u64 ccrig_law_increase(const struct ccrig_params *p, u32 w)
{
	(void)p;
	(void)w;
	return 0;
}

static inline u64 ccrig_law_loss_window(const struct ccrig_params *p, u32 w)
{
	(void)w;
	return (u64)p->terms << CCRIG_FP;
}

#endif
