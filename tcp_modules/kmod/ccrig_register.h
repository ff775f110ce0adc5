/* SPDX-License-Identifier: GPL-2.0 */
/* Registers every entry of the including file's `ccrig_variants` array, all or none. */
#ifndef CCRIG_REGISTER_H
#define CCRIG_REGISTER_H

static int __init ccrig_register(void)
{
	int i, err;

	for (i = 0; i < ARRAY_SIZE(CCRIG_VARIANTS); i++) {
		err = tcp_register_congestion_control(&CCRIG_VARIANTS[i].ops);
		if (err) {
			while (--i >= 0)
				tcp_unregister_congestion_control(&CCRIG_VARIANTS[i].ops);
			return err;
		}
	}
	return 0;
}

static void __exit ccrig_unregister(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(CCRIG_VARIANTS); i++)
		tcp_unregister_congestion_control(&CCRIG_VARIANTS[i].ops);
}

#endif
