/*
 * The metrics endpoint (coordinator/metrics.c; doc/protocol.md,
 * "Metrics"): the page in Prometheus' text format, its labels escaped and
 * its unknown facts left out, and the HTTP side over a real loopback
 * socket: an answer to GET /metrics, 404 and 405, a request too long, and
 * a silent client dropped at its deadline.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"
#include "tests/testlib.h"

#define RUN "file:///ckpt/alice/resnet-a"

static char *render(const struct dpt__metrics *m)
{
	struct dpt__buf b;
	char *s;

	dpt__buf_init(&b, DPT_METRICS_PAGE_MAX);
	assert_int_equal(dpt__metrics_render(m, &b), 0);
	s = dpt__buf_steal(&b);
	assert_non_null(s);
	return s;
}

static void the_page_has_every_fact(void **state)
{
	struct dpt__msg_status st = status_running(RUN);
	struct dpt__metrics m = {
		.st = &st,
		.generation = 3,
		.joined = 4,
		.stop_at = 1700003600 - 600,
		.now_ms = 1700000002500ull,
		.counters = {.saves = 5,
			     .saved_bytes = 123456789012ull,
			     .commits = 12,
			     .evictions = 1,
			     .generations = 3,
			     .status_answered = 7,
			     .scrapes = 9},
	};
	char *s = render(&m);
	(void)state;

#define HAS(text) assert_non_null(strstr(s, text))
	HAS("# HELP dptrain_world_size ");
	HAS("# TYPE dptrain_world_size gauge\n");
	HAS("\ndptrain_world_size{job=\"42\",run=\"resnet-a\"} 4\n");
	HAS("dptrain_state{job=\"42\",run=\"resnet-a\",state=\"running\"} 1\n");
	HAS("dptrain_state{job=\"42\",run=\"resnet-a\",state=\"gathering\"} "
	    "0\n");
	HAS("dptrain_workers_expected{job=\"42\",run=\"resnet-a\"} 4\n");
	HAS("dptrain_workers_joined{job=\"42\",run=\"resnet-a\"} 4\n");
	HAS("dptrain_generation{job=\"42\",run=\"resnet-a\"} 3\n");
	HAS("dptrain_restarts{job=\"42\",run=\"resnet-a\"} 2\n");
	HAS("dptrain_step{job=\"42\",run=\"resnet-a\"} 130\n");
	HAS("dptrain_committed_step{job=\"42\",run=\"resnet-a\"} 120\n");
	HAS("dptrain_committed_age_seconds{job=\"42\",run=\"resnet-a\"} "
	    "2.500\n");
	/* 3000 s to the end time's grace, less the 2.5 s gone. */
	HAS("dptrain_walltime_stop_seconds{job=\"42\",run=\"resnet-a\"} "
	    "2997.500\n");
	HAS("# TYPE dptrain_checkpoint_saves_total counter\n");
	HAS("dptrain_checkpoint_saves_total{job=\"42\",run=\"resnet-a\"} 5\n");
	HAS("dptrain_checkpoint_saved_bytes_total{job=\"42\",run=\"resnet-a\"}"
	    " 123456789012\n");
	HAS("dptrain_evictions_total{job=\"42\",run=\"resnet-a\"} 1\n");
	HAS("dptrain_status_requests_total{job=\"42\",run=\"resnet-a\"} 7\n");
	HAS("dptrain_metrics_scrapes_total{job=\"42\",run=\"resnet-a\"} 9\n");
	HAS("dptrain_coordinator_start_time_seconds{job=\"42\",run=\"resnet-"
	    "a\"} 1699999990.500\n");
#undef HAS
	/* Every line is a comment or a sample, and ends the page. */
	assert_int_equal(s[strlen(s) - 1], '\n');
	for (char *l = s; *l; l = strchr(l, '\n') + 1)
		assert_true(l[0] == '#' || !strncmp(l, "dptrain_", 8));
	free(s);
}

/* Before the first generation: no step, no commit, no end time: no
 * family for them, rather than a made-up 0. A label value is escaped. */
static void unknown_facts_are_left_out(void **state)
{
	struct dpt__msg_status st = {
		.state = DPT_STATUS_GATHERING,
		.expected = 8,
		.step = DPT_STATUS_NO_STEP,
		.committed = DPT_STATUS_NO_STEP,
	};
	struct dpt__metrics m = {.st = &st, .generation = 1, .joined = 3};
	char *s;
	(void)state;

	snprintf(st.run, sizeof(st.run), "a\"b\\c\nd");
	s = render(&m);
	assert_non_null(
		strstr(s, "dptrain_workers_joined{job=\"\",run=\"a\\\"b\\\\c"
			  "\\nd\"} 3\n"));
	assert_null(strstr(s, "dptrain_step"));
	assert_null(strstr(s, "dptrain_committed"));
	assert_null(strstr(s, "dptrain_walltime_stop_seconds"));
	assert_null(strstr(s, "dptrain_end_time_seconds"));
	assert_non_null(strstr(s, "state=\"gathering\"} 1\n"));
	free(s);
}

/* A buffer too small: an error, never a cut page. */
static void a_page_too_big_is_an_error(void **state)
{
	struct dpt__msg_status st = status_running(RUN);
	struct dpt__metrics m = {.st = &st};
	struct dpt__buf b;
	(void)state;

	dpt__buf_init(&b, 200);
	assert_int_not_equal(dpt__metrics_render(&m, &b), 0);
	dpt__buf_release(&b);
}

/* ------------------------------------------------------------ HTTP */

static int pages;

static int page(void *arg, struct dpt__buf *out)
{
	(void)arg;
	pages++;
	return dpt__buf_puts(out, "dptrain_up 1\n");
}

static int connect_to(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Send REQ, serve a few turns, return what came back (static). */
static const char *exchange(struct dpt__metrics_server *s, int fd,
			    const char *req, size_t len)
{
	static char got[4096];
	size_t n = 0;

	if (len)
		assert_int_equal(send(fd, req, len, 0), (ssize_t)len);
	for (int i = 0; i < 5; i++) {
		usleep(2000);
		dpt__metrics_server_serve(s, 1000);
	}
	for (;;) {
		ssize_t r =
			recv(fd, got + n, sizeof(got) - 1 - n, MSG_DONTWAIT);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	got[n] = '\0';
	return got;
}

static void http_answers(void **state)
{
	struct dpt__metrics_server *s = NULL;
	static char big[DPT_METRICS_REQUEST_MAX + 100];
	const char *got;
	int port = 0, fd, fds[DPT_METRICS_MAX_CLIENTS + 1];
	short evs[DPT_METRICS_MAX_CLIENTS + 1];
	(void)state;

	assert_int_equal(
		dpt__metrics_server_new(&s, "127.0.0.1", 0, &port, page, NULL),
		0);
	assert_true(port > 0);
	/* Idle: only the listening socket is polled. */
	assert_int_equal(dpt__metrics_server_fds(s, fds, evs, 9), 1);
	assert_int_equal(dpt__metrics_server_deadline(s), 0);

	fd = connect_to(port);
	got = exchange(s, fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 35);
	assert_non_null(strstr(got, "HTTP/1.0 200 OK\r\n"));
	assert_non_null(strstr(got, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(got, "Content-Length: 13\r\n"));
	assert_non_null(strstr(got, "\r\n\r\ndptrain_up 1\n"));
	assert_int_equal(pages, 1);
	close(fd);

	fd = connect_to(port);
	got = exchange(s, fd, "GET / HTTP/1.0\r\n\r\n", 18);
	assert_non_null(strstr(got, "HTTP/1.0 404 "));
	close(fd);
	fd = connect_to(port);
	got = exchange(s, fd, "POST /metrics HTTP/1.0\r\n\r\n", 26);
	assert_non_null(strstr(got, "HTTP/1.0 405 "));
	close(fd);
	memset(big, 'a', sizeof(big));
	fd = connect_to(port);
	got = exchange(s, fd, big, sizeof(big));
	assert_non_null(strstr(got, "HTTP/1.0 431 "));
	close(fd);
	assert_int_equal(pages, 1);

	/* A client that says nothing holds a slot until its deadline. */
	fd = connect_to(port);
	exchange(s, fd, NULL, 0);
	assert_int_equal(dpt__metrics_server_deadline(s),
			 1000 + DPT_METRICS_CLIENT_TIMEOUT_MS);
	assert_int_equal(dpt__metrics_server_fds(s, fds, evs, 9), 2);
	dpt__metrics_server_serve(s, 1000 + DPT_METRICS_CLIENT_TIMEOUT_MS);
	assert_int_equal(dpt__metrics_server_fds(s, fds, evs, 9), 1);
	assert_int_equal(recv(fd, big, sizeof(big), 0), 0); /* closed */
	close(fd);

	/* The port taken: a clear error. */
	{
		struct dpt__metrics_server *t = NULL;
		int p2;
		assert_int_not_equal(dpt__metrics_server_new(&t, "127.0.0.1",
							     port, &p2, page,
							     NULL),
				     0);
		assert_null(t);
	}
	dpt__metrics_server_destroy(&s);
	assert_null(s);
	dpt__metrics_server_destroy(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_page_has_every_fact),
		cmocka_unit_test(unknown_facts_are_left_out),
		cmocka_unit_test(a_page_too_big_is_an_error),
		cmocka_unit_test(http_answers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
