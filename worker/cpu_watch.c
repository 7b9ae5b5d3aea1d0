#include "config.h"

#include <errno.h>

#include <dptrain/error.h>

#include "cpu_watch.h"

int dpt__cpu_watch_poll(struct dpt__cpu_watch *w, struct pollfd *fds, int nfds,
			int timeout_ms)
{
	struct pollfd p[DPT__WATCH_MAX_FDS + 1];
	int rc;

	if (atomic_load_explicit(&w->aborted, memory_order_acquire))
		return DPT_EGENERATION;
	for (int i = 0; i < nfds; i++)
		p[i] = fds[i];
	p[nfds] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
	do {
		rc = poll(p, (nfds_t)nfds + 1, timeout_ms);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return DPT_ESYS;
	if (atomic_load_explicit(&w->aborted, memory_order_acquire))
		return DPT_EGENERATION;
	for (int i = 0; i < nfds; i++)
		fds[i].revents = p[i].revents;
	return 0;
}
