/*
 * The coordinator's event loop: see loop.h and doc/architecture.md.
 */
#include "config.h"

#include <errno.h>

#include <dptrain/error.h>

#include "clock.h"
#include "log.h"
#include "loop.h"

int dpt__loop_add(struct dpt__loop *l, struct dpt__loop_source s)
{
	if (l->nsources == DPT_LOOP_SOURCES_MAX)
		return DPT_ETOOBIG;
	l->sources[l->nsources++] = s;
	return 0;
}

/* Whether one of the N items after FIRST is ready. */
static bool any_ready(const zmq_pollitem_t *first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (first[i].revents)
			return true;
	return false;
}

int dpt__loop_run(struct dpt__loop *l, bool (*done)(void *arg), void *arg)
{
	while (!done(arg)) {
		zmq_pollitem_t items[DPT_LOOP_ITEMS_MAX];
		size_t first[DPT_LOOP_SOURCES_MAX], count[DPT_LOOP_SOURCES_MAX];
		int64_t due[DPT_LOOP_SOURCES_MAX];
		int64_t now = dpt__now_ms(), wake = INT64_MAX;
		size_t n = 0;

		for (size_t s = 0; s < l->nsources; s++) {
			const struct dpt__loop_source *src = &l->sources[s];

			due[s] = INT64_MAX;
			first[s] = n;
			if (src->prepare)
				count[s] = src->prepare(src->arg, items + n,
							DPT_LOOP_ITEMS_MAX - n,
							now, &due[s]);
			else if ((count[s] = src->item.events != 0))
				items[n] = src->item;
			n += count[s];
			dpt__loop_deadline(&wake, due[s]);
		}
		if (zmq_poll(items, (int)n,
			     wake == INT64_MAX ? -1
			     : wake <= now     ? 0
					       : (long)(wake - now)) < 0 &&
		    errno != EINTR) {
			dpt__error("poll failed: %s", zmq_strerror(errno));
			return DPT_ESYS;
		}
		now = dpt__now_ms();
		for (size_t s = 0; s < l->nsources; s++) {
			const struct dpt__loop_source *src = &l->sources[s];

			if (src->every_turn || due[s] <= now ||
			    any_ready(items + first[s], count[s]))
				src->ready(src->arg, items + first[s], count[s],
					   now);
		}
	}
	return 0;
}
