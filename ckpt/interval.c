/*
 * --dp-ckpt-every=auto: the interval between periodic checkpoints, after
 * Young ("A first order approximation to the optimum checkpoint
 * interval", CACM 1974) and Daly (FGCS 2006). A job that saves every T
 * seconds, each save costing the training C seconds, and that fails on
 * average every M seconds loses about C/T to saves and T/(2M) to the work
 * redone after a failure; the sum is smallest at T = sqrt(2 C M). The
 * approximation holds while C is small against M (Daly: T = M once
 * C >= M/2), hence the cap at M.
 */
#include "config.h"

#include <math.h>

#include "ckpt_int.h"
#include "parse.h"

double dpt__ckpt_auto_interval(double cost_s, double mtbf_s, double min_s)
{
	double cap = DPT_CKPT_EVERY_AUTO_S, t;

	if (mtbf_s > 0 && mtbf_s < cap)
		cap = mtbf_s;
	/* No save measured yet: the longest interval auto allows, which
	 * is the fixed interval auto used to be. */
	t = cost_s > 0 && mtbf_s > 0 ? sqrt(2 * cost_s * mtbf_s) : cap;
	if (t > cap)
		t = cap;
	/* The site's floor protects shared storage: it wins over the cap. */
	if (t < min_s)
		t = min_s;
	return t;
}

double dpt__ckpt_cost_update(double avg, double sample)
{
	if (sample < 0)
		return avg;
	return avg > 0 ? (avg + sample) / 2 : sample;
}
