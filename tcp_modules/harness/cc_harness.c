/*
 * cc_harness — checks the fixed-point core (include/ccrig_law.h) with one family's C law against that family's
 * vectors. Built once per family: CCRIG_LAW_FILE names its law ("../families/NAME.h"; make -C tcp_modules harness
 * makes build/cc_harness_NAME).
 *
 * Reads a line format on stdin (tests/unit/test_cc_core.py writes it from families/NAME.vectors.json):
 *   tol REL ABS
 *   case NAME LAW ALPHA_Q BETA_Q K L TERMS PER_ACK HALVE_FIRST     the parameter block's slots; LAW the family's code
 *   inc W EXPECTED                                     I(W), segments per RTT
 *   loss W EXPECTED                                    window after a later loss at W (the law's decrease)
 *   first W EXPECTED                                   window after the connection's first loss at W
 *   ack CWND ACC ACKED EXPECTED                        window after ACKED segments from (CWND, ACC)
 *   lossstep CWND ACC SEEN EXPECTED                    window after a loss from (CWND, ACC), SEEN 1 if a loss
 *                                                      came before (halve_first is spent)
 * ACC is in segments x window, the reference's unit; a window is cwnd + acc / cwnd.
 * Each value must satisfy |c - expected| <= REL |expected| + ABS. Prints each failure, then
 * "N passed, N failed"; exits 1 if any failed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;

#include "../include/ccrig_law.h"

static double rel_tol = 1e-4, abs_tol = 1e-5;
static int passed, failed;
static char case_name[128];

static double q2d(u64 q)
{
	return (double)q / (double)CCRIG_ONE;
}

static void check(const char *what, const char *line, double got, double want)
{
	if (fabs(got - want) <= rel_tol * fabs(want) + abs_tol) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s %s: got %.9g, expected %.9g (%s)\n", case_name, what, got, want, line);
}

static double window(u32 cwnd, u64 acc)
{
	return (double)cwnd + q2d(acc) / (double)cwnd;
}

int main(void)
{
	char line[512], op[32];
	struct ccrig_params p;
	memset(&p, 0, sizeof(p));

	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%31s", op) != 1)
			continue;
		if (!strcmp(op, "tol")) {
			sscanf(line, "tol %lf %lf", &rel_tol, &abs_tol);
		} else if (!strcmp(op, "case")) {
			unsigned long long a, b;
			unsigned law, terms, per_ack, halve_first;
			int k, l;

			if (sscanf(line, "case %127s %u %llu %llu %d %d %u %u %u", case_name, &law, &a, &b, &k, &l,
				   &terms, &per_ack, &halve_first) != 9) {
				printf("bad line: %s\n", line);
				return 2;
			}
			memset(&p, 0, sizeof(p));
			p.law = law;
			p.alpha = a;
			p.beta = b;
			p.k = k;
			p.l = l;
			p.terms = terms;
			p.per_ack = per_ack;
			p.halve_first = halve_first;
		} else if (!strcmp(op, "inc") || !strcmp(op, "loss") || !strcmp(op, "first")) {
			unsigned w;
			double want;

			sscanf(line, "%*s %u %lf", &w, &want);
			if (!strcmp(op, "inc"))
				check("increase", line, q2d(ccrig_increase(&p, w)), want);
			else if (!strcmp(op, "loss"))
				check("loss window", line, q2d(ccrig_loss_window_at(&p, w, 1)), want);
			else
				check("first loss window", line, q2d(ccrig_loss_window_at(&p, w, 0)), want);
		} else if (!strcmp(op, "ack")) {
			unsigned cwnd, acked;
			double acc_in, want;
			u64 acc;

			sscanf(line, "ack %u %lf %u %lf", &cwnd, &acc_in, &acked, &want);
			acc = (u64)llround(acc_in * (double)CCRIG_ONE);
			cwnd = ccrig_on_ack(&p, cwnd, acked, &acc);
			check("ack step", line, window(cwnd, acc), want);
		} else if (!strcmp(op, "lossstep")) {
			unsigned cwnd, seen;
			double acc_in, want;
			u64 acc = 0;

			sscanf(line, "lossstep %u %lf %u %lf", &cwnd, &acc_in, &seen, &want);
			cwnd = ccrig_on_loss(&p, cwnd, &acc, &seen);
			if (seen != 1) {
				printf("FAIL %s loss step did not mark the loss seen (%s)\n", case_name, line);
				failed++;
			}
			check("loss step", line, window(cwnd, acc), want);
		} else {
			printf("bad line: %s\n", line);
			return 2;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
