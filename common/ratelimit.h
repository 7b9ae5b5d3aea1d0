/*
 * Rate-limited logging: a hostile or broken client cannot flood a log. At
 * most BURST lines per WINDOW_MS; the events not logged are counted, and
 * the next line that is says how many it stands for.
 */
#ifndef DPT_COMMON_RATELIMIT_H
#define DPT_COMMON_RATELIMIT_H

#include <stdint.h>

struct dpt__ratelimit {
	int64_t window_start; /* ms, on the caller's clock */
	int logged;	      /* lines in this window */
	long suppressed;      /* events not logged since the last line */
};

/*
 * One event at NOW (ms). Returns 0 when it must not be logged (it is
 * counted), else how many events the line logged now stands for: 1, plus
 * those suppressed before it.
 */
static inline long dpt__ratelimit(struct dpt__ratelimit *rl, int64_t now,
				  int burst, int64_t window_ms)
{
	long n;

	if (now - rl->window_start >= window_ms || now < rl->window_start) {
		rl->window_start = now;
		rl->logged = 0;
	}
	if (rl->logged >= burst) {
		rl->suppressed++;
		return 0;
	}
	rl->logged++;
	n = rl->suppressed + 1;
	rl->suppressed = 0;
	return n;
}

#endif
