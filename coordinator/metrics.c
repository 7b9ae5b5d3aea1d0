/*
 * The metrics endpoint: see metrics.h and doc/protocol.md, "Metrics".
 */
#define _GNU_SOURCE /* accept4 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <dptrain/error.h>

#include "log.h"
#include "metrics.h"

/* ------------------------------------------------------------ the page */

/* VALUE as a label value: backslash, double quote and newline escaped, as
 * the text format requires. */
static int put_label(struct dpt__buf *out, const char *value)
{
	int rc = 0;

	for (const char *p = value; *p && !rc; p++) {
		if (*p == '\\')
			rc = dpt__buf_puts(out, "\\\\");
		else if (*p == '"')
			rc = dpt__buf_puts(out, "\\\"");
		else if (*p == '\n')
			rc = dpt__buf_puts(out, "\\n");
		else
			rc = dpt__buf_append(out, p, 1);
	}
	return rc;
}

struct page {
	struct dpt__buf *out;
	char labels[2 * DPT_WIRE_TEXT_MAX + 64]; /* job="..",run=".." */
	int rc;
};

/* A family's HELP and TYPE lines. */
static void family(struct page *p, const char *name, const char *type,
		   const char *help)
{
	if (!p->rc)
		p->rc = dpt__buf_printf(p->out, "# HELP %s %s\n# TYPE %s %s\n",
					name, help, name, type);
}

/* One sample of NAME with the job's labels and EXTRA ones ("" or
 * ",state=\"running\""). */
static void sample(struct page *p, const char *name, const char *extra,
		   const char *value)
{
	if (!p->rc)
		p->rc = dpt__buf_printf(p->out, "%s{%s%s} %s\n", name,
					p->labels, extra, value);
}

static void one_u64(struct page *p, const char *name, const char *type,
		    const char *help, uint64_t v)
{
	char text[32];

	snprintf(text, sizeof(text), "%" PRIu64, v);
	family(p, name, type, help);
	sample(p, name, "", text);
}

static void one_double(struct page *p, const char *name, const char *help,
		       double v)
{
	char text[40];

	snprintf(text, sizeof(text), "%.3f", v);
	family(p, name, "gauge", help);
	sample(p, name, "", text);
}

/* The counters, in the order of the page. */
static const struct {
	const char *name, *help;
	size_t offset; /* of a uint64_t in struct dpt__metrics_counters */
} counters[] = {
#define COUNTER(field, name, help)                                             \
	{                                                                      \
		name, help, offsetof(struct dpt__metrics_counters, field)      \
	}
	COUNTER(generations, "dptrain_generations_total",
		"Generations formed by this coordinator."),
	COUNTER(saves, "dptrain_checkpoint_saves_total",
		"Checkpoints saved (each commit of a save)."),
	COUNTER(saved_bytes, "dptrain_checkpoint_saved_bytes_total",
		"Bytes of those checkpoints."),
	COUNTER(commits, "dptrain_checkpoint_commits_total",
		"Checkpoint commits reported."),
	COUNTER(evictions, "dptrain_evictions_total",
		"Workers evicted (lost, silent or failed)."),
	COUNTER(status_answered, "dptrain_status_requests_total",
		"STATUS requests answered (dptrain status)."),
	COUNTER(scrapes, "dptrain_metrics_scrapes_total",
		"Metrics pages served, this one included."),
#undef COUNTER
};

int dpt__metrics_render(const struct dpt__metrics *m, struct dpt__buf *out)
{
	static const char *const states[] = {"gathering", "id_wait", "running",
					     "done"};
	const struct dpt__msg_status *st = m->st;
	const struct dpt__metrics_counters *n = &m->counters;
	struct page p = {.out = out};
	struct dpt__buf lb;
	const char *run = st->run, *slash = strrchr(run, '/');
	char job[16] = "";

	/* The run's name, not its URI: a label that stays the same when
	 * the run moves between file systems. */
	if (slash && slash[1])
		run = slash + 1;
	if (st->job_id)
		snprintf(job, sizeof(job), "%" PRIu32, st->job_id);
	dpt__buf_init(&lb, sizeof(p.labels) - 1);
	p.rc = dpt__buf_puts(&lb, "job=\"");
	if (!p.rc)
		p.rc = put_label(&lb, job);
	if (!p.rc)
		p.rc = dpt__buf_puts(&lb, "\",run=\"");
	if (!p.rc)
		p.rc = put_label(&lb, run);
	if (!p.rc)
		p.rc = dpt__buf_puts(&lb, "\"");
	if (!p.rc)
		memcpy(p.labels, lb.data, lb.len + 1);
	dpt__buf_release(&lb);

	family(&p, "dptrain_state", "gauge",
	       "The coordinator's state: 1 for the current one.");
	for (unsigned i = 0; i < sizeof(states) / sizeof(*states); i++) {
		char extra[32];

		snprintf(extra, sizeof(extra), ",state=\"%s\"", states[i]);
		sample(&p, "dptrain_state", extra,
		       st->state == i + DPT_STATUS_GATHERING ? "1" : "0");
	}
	one_u64(&p, "dptrain_stopping", "gauge",
		"1 once the step is being stopped (walltime or a rank's "
		"request), else 0.",
		(st->flags & DPT_STATUS_STOPPING) ? 1 : 0);
	one_u64(&p, "dptrain_world_size", "gauge",
		"Ranks in the live generation, 0 while none is.", st->world);
	one_u64(&p, "dptrain_nodes", "gauge",
		"Nodes of the live generation's ranks.", st->nodes);
	one_u64(&p, "dptrain_workers_expected", "gauge",
		"Tasks of the job step (the world size asked for).",
		st->expected);
	one_u64(&p, "dptrain_workers_joined", "gauge",
		"Workers joined to the generation being formed or live.",
		m->joined);
	one_u64(&p, "dptrain_generation", "gauge",
		"The generation being formed or live (1 while the first is "
		"formed).",
		m->generation);
	one_u64(&p, "dptrain_restarts", "gauge",
		"Times the job was requeued before this run of it.",
		st->restarts);
	if (st->step != DPT_STATUS_NO_STEP)
		one_u64(&p, "dptrain_step", "gauge",
			"The newest global step the ranks reported.", st->step);
	if (st->committed != DPT_STATUS_NO_STEP) {
		one_u64(&p, "dptrain_committed_step", "gauge",
			"The newest committed checkpoint's step.",
			st->committed);
		if (st->committed_at && m->now_ms >= st->committed_at)
			one_double(&p, "dptrain_committed_age_seconds",
				   "Seconds since that checkpoint was "
				   "committed.",
				   (double)(m->now_ms - st->committed_at) /
					   1000.0);
	}
	if (m->stop_at > 0)
		one_double(&p, "dptrain_walltime_stop_seconds",
			   "Seconds until the step is stopped for the job's "
			   "walltime (its end time less the grace); negative "
			   "once past.",
			   (double)m->stop_at - (double)m->now_ms / 1000.0);
	if (st->end_time)
		one_u64(&p, "dptrain_end_time_seconds", "gauge",
			"The job's end time, Unix seconds.", st->end_time);
	one_double(&p, "dptrain_coordinator_start_time_seconds",
		   "When this coordinator started, Unix seconds.",
		   (double)st->started_at / 1000.0);
	for (size_t i = 0; i < sizeof(counters) / sizeof(*counters); i++)
		one_u64(&p, counters[i].name, "counter", counters[i].help,
			*(const uint64_t *)((const char *)n +
					    counters[i].offset));
	return p.rc;
}

/* ------------------------------------------------------------ HTTP */

struct client {
	int fd;		  /* -1: a free slot */
	int64_t deadline; /* monotonic ms */
	size_t in_len;
	char in[DPT_METRICS_REQUEST_MAX];
	char *reply; /* malloc'd, NULL until answered */
	size_t reply_len, sent;
};

struct dpt__metrics_server {
	int listen_fd;
	dpt__metrics_page_fn *page;
	void *arg;
	struct dpt__buf body;
	struct client clients[DPT_METRICS_MAX_CLIENTS];
};

int dpt__metrics_server_new(struct dpt__metrics_server **out, const char *host,
			    long port, int *bound, dpt__metrics_page_fn *page,
			    void *arg)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct dpt__metrics_server *s;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char service[16];
	int one = 1, err, rc = DPT_ESYS;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return DPT_ENOMEM;
	s->listen_fd = -1;
	s->page = page;
	s->arg = arg;
	dpt__buf_init(&s->body, DPT_METRICS_PAGE_MAX);
	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS; i++)
		s->clients[i].fd = -1;
	if (host && (!strcmp(host, "*") || !*host))
		host = NULL;
	snprintf(service, sizeof(service), "%ld", port);
	err = getaddrinfo(host, service, &hints, &res);
	if (err) {
		dpt__error("cannot resolve the metrics address '%s': %s",
			   host ? host : "*", gai_strerror(err));
		goto out;
	}
	s->listen_fd =
		socket(res->ai_family,
		       res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0 ||
	    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
		       sizeof(one)) != 0 ||
	    bind(s->listen_fd, res->ai_addr, res->ai_addrlen) != 0 ||
	    listen(s->listen_fd, DPT_METRICS_MAX_CLIENTS * 2) != 0 ||
	    getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
		dpt__error("cannot listen for metrics on port %ld: %s (pick "
			   "another port, or 0 for any free one)",
			   port, strerror(errno));
		goto out;
	}
	*bound = ntohs(ss.ss_family == AF_INET6
			       ? ((struct sockaddr_in6 *)&ss)->sin6_port
			       : ((struct sockaddr_in *)&ss)->sin_port);
	rc = 0;
out:
	if (res)
		freeaddrinfo(res);
	if (rc)
		dpt__metrics_server_destroy(&s);
	*out = s;
	return rc;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->reply);
	*c = (struct client){.fd = -1};
}

void dpt__metrics_server_destroy(struct dpt__metrics_server **sp)
{
	struct dpt__metrics_server *s = *sp;

	if (!s)
		return;
	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS; i++)
		client_close(&s->clients[i]);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	dpt__buf_release(&s->body);
	free(s);
	*sp = NULL;
}

size_t dpt__metrics_server_fds(const struct dpt__metrics_server *s, int *fds,
			       short *events, size_t max)
{
	size_t n = 0, free_slots = 0;

	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS && n < max; i++) {
		const struct client *c = &s->clients[i];

		if (c->fd < 0) {
			free_slots++;
			continue;
		}
		fds[n] = c->fd;
		events[n++] = c->reply ? POLLOUT : POLLIN;
	}
	if (free_slots && n < max) {
		fds[n] = s->listen_fd;
		events[n++] = POLLIN;
	}
	return n;
}

int64_t dpt__metrics_server_deadline(const struct dpt__metrics_server *s)
{
	int64_t d = 0;

	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS; i++)
		if (s->clients[i].fd >= 0 && (!d || s->clients[i].deadline < d))
			d = s->clients[i].deadline;
	return d;
}

/* The answer to the request in C->in: 200 with the page for GET (or HEAD)
 * /metrics, else 404, 405 or 400, each closing the connection. */
static void answer(struct dpt__metrics_server *s, struct client *c,
		   bool complete)
{
	const char *status = "200 OK", *ctype = "text/plain; version=0.0.4; "
						"charset=utf-8";
	const char *body;
	size_t body_len;
	bool head = false;
	struct dpt__buf r;
	char *line_end;

	c->in[c->in_len < sizeof(c->in) ? c->in_len : sizeof(c->in) - 1] = '\0';
	line_end = strpbrk(c->in, "\r\n");
	if (line_end)
		*line_end = '\0';
	dpt__buf_reset(&s->body);
	if (!complete || !line_end) {
		status = "431 Request Header Fields Too Large";
	} else if (strncmp(c->in, "GET ", 4) && strncmp(c->in, "HEAD ", 5)) {
		status = "405 Method Not Allowed";
	} else {
		const char *path = strchr(c->in, ' ') + 1;
		size_t plen = strcspn(path, " ?");

		head = c->in[0] == 'H';
		if (plen != 8 || strncmp(path, "/metrics", 8))
			status = "404 Not Found";
	}
	if (strcmp(status, "200 OK")) {
		ctype = "text/plain; charset=utf-8";
		dpt__buf_printf(&s->body, "%s: try GET /metrics\n", status);
	} else if (s->page(s->arg, &s->body) != 0) {
		status = "500 Internal Server Error";
		dpt__buf_reset(&s->body);
		dpt__buf_puts(&s->body, "the page does not fit\n");
	}
	body = s->body.data ? s->body.data : "";
	body_len = s->body.len;
	dpt__buf_init(&r, DPT_METRICS_PAGE_MAX + 512);
	if (dpt__buf_printf(&r,
			    "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n"
			    "Cache-Control: no-store\r\n\r\n",
			    status, ctype, body_len) != 0 ||
	    (!head && dpt__buf_append(&r, body, body_len) != 0)) {
		dpt__buf_release(&r);
		client_close(c);
		return;
	}
	c->reply_len = r.len;
	c->reply = dpt__buf_steal(&r);
	c->sent = 0;
	if (!c->reply)
		client_close(c);
}

static void client_read(struct dpt__metrics_server *s, struct client *c)
{
	for (;;) {
		size_t room = sizeof(c->in) - 1 - c->in_len;
		ssize_t n;

		if (!room) {
			answer(s, c, false);
			return;
		}
		n = recv(c->fd, c->in + c->in_len, room, 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			client_close(c); /* gone before asking */
			return;
		}
		c->in_len += (size_t)n;
		c->in[c->in_len] = '\0';
		/* The end of the headers; HTTP/0.9-style clients and
		 * netcat send a bare LF. */
		if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n")) {
			answer(s, c, true);
			return;
		}
	}
}

static void client_write(struct client *c)
{
	while (c->sent < c->reply_len) {
		ssize_t n = send(c->fd, c->reply + c->sent,
				 c->reply_len - c->sent, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		c->sent += (size_t)n;
	}
	/* Answered (or the client left): the connection ends here, as the
	 * Connection: close header said. What the client sent past the
	 * request is read first: closing on unread bytes sends a reset,
	 * which can destroy the answer before the client reads it. */
	shutdown(c->fd, SHUT_WR);
	for (int i = 0; i < 4; i++) {
		char sink[512];
		if (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
	}
	client_close(c);
}

void dpt__metrics_server_serve(struct dpt__metrics_server *s, int64_t now)
{
	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS; i++) {
		struct client *c = &s->clients[i];

		if (c->fd < 0)
			continue;
		if (now >= c->deadline) {
			client_close(c);
			continue;
		}
		if (!c->reply)
			client_read(s, c);
		if (c->fd >= 0 && c->reply)
			client_write(c);
	}
	for (int i = 0; i < DPT_METRICS_MAX_CLIENTS; i++) {
		struct client *c = &s->clients[i];
		int fd;

		if (c->fd >= 0)
			continue;
		fd = accept4(s->listen_fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break; /* EAGAIN, or an error the next turn retries */
		*c = (struct client){
			.fd = fd,
			.deadline = now + DPT_METRICS_CLIENT_TIMEOUT_MS,
		};
		/* Most requests are already there with the connection. */
		client_read(s, c);
		if (c->fd >= 0 && c->reply)
			client_write(c);
	}
}

/* The host of the --bind endpoint ("tcp://HOST:PORT"), brackets of an
 * IPv6 address removed, into BUF. */
static void bind_host(const char *bind, char *buf, size_t size)
{
	const char *h = strstr(bind, "://"), *colon = strrchr(bind, ':');
	size_t len;

	snprintf(buf, size, "*");
	if (!h || !colon || colon < h + 3)
		return;
	h += 3;
	len = (size_t)(colon - h);
	if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
		h++;
		len -= 2;
	}
	if (len && len < size)
		snprintf(buf, size, "%.*s", (int)len, h);
}

void dpt__metrics_start(struct dpt__metrics_server **out, const char *bind,
			const char *endpoint, long port, int *bound,
			dpt__metrics_page_fn *page, void *arg)
{
	char host[256];

	bind_host(bind, host, sizeof(host));
	/* Asked for and not available is said, but does not stop the step:
	 * any user of the host can take a fixed port first, and the
	 * training matters more than its scrape. */
	if (dpt__metrics_server_new(out, host, port, bound, page, arg) != 0) {
		dpt__warn("the step goes on without a metrics endpoint");
		return;
	}
	/* The URL a scraper uses: the host workers are told, which a
	 * wildcard bind also listens on. */
	bind_host(endpoint, host, sizeof(host));
	dpt__info("serving metrics at http://%s%s%s:%d/metrics",
		  strchr(host, ':') ? "[" : "", host,
		  strchr(host, ':') ? "]" : "", *bound);
}

static size_t metrics_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			      int64_t now, int64_t *deadline)
{
	struct dpt__metrics_server *m = arg;
	int fds[DPT_METRICS_MAX_CLIENTS + 1];
	short evs[DPT_METRICS_MAX_CLIENTS + 1];
	size_t n = dpt__metrics_server_fds(m, fds, evs,
					   DPT_METRICS_MAX_CLIENTS + 1);
	int64_t at = dpt__metrics_server_deadline(m);

	(void)now;
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		items[i] = dpt__loop_item(NULL, fds[i],
					  evs[i] & POLLOUT ? ZMQ_POLLOUT
							   : ZMQ_POLLIN);
	if (at)
		dpt__loop_deadline(deadline, at);
	return n;
}

static void metrics_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			  int64_t now)
{
	(void)items, (void)n;
	dpt__metrics_server_serve(arg, now);
}

struct dpt__loop_source dpt__metrics_source(struct dpt__metrics_server *m)
{
	return (struct dpt__loop_source){
		.name = "metrics",
		.prepare = metrics_prepare,
		.ready = metrics_ready,
		.arg = m,
	};
}
