/*
 * storage_tool: drives the storage interface from test scripts.
 *
 *   storage_tool [OPTIONS] URI put KEY FILE
 *   storage_tool [OPTIONS] URI put-if-absent KEY FILE
 *   storage_tool [OPTIONS] URI get KEY FILE [OFFSET LENGTH]   (FILE '-':
 * stdout) storage_tool [OPTIONS] URI stat KEY storage_tool [OPTIONS] URI list
 * [PREFIX] storage_tool [OPTIONS] URI delete KEY... storage_tool [OPTIONS] URI
 * gc PREFIX OLDER_THAN_S
 *   storage_tool [OPTIONS] URI append KEY LINE...
 *   storage_tool [OPTIONS] URI caps
 *
 * append appends each LINE and a newline to KEY, one append each, through
 * one appender; caps prints "append" when the backend appends cheaply
 * (DPT__STORAGE_CAP_APPEND), "rewrite" otherwise.
 * put writes FILE through a writer in pieces of --piece bytes from
 * --threads threads (thread i writes pieces i, i+T, ...), the way ranks
 * write parts of one shard; --delay-ms sleeps after each piece and
 * --progress prints "wrote END" after each (for tests that act while an
 * upload is under way); get reads with ranged reads.
 * Options: --part-size N, --inflight N, --retries N, --retry-base-ms N,
 * --retry-max-ms N, --stall-ms N, --page N, --direct, --unsigned-payload.
 * On failure it prints "storage_tool: COMMAND: DPT_XXX (message)" on
 * stderr, after the library's own message, and exits 1; usage errors
 * exit 2.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "parse.h"
#include "storage/storage.h"

struct tool {
	struct dpt__storage_opts opts;
	long threads;
	long piece;
	long delay_ms;
	bool progress;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: storage_tool [--part-size N] [--inflight N] "
		"[--retries N] [--retry-base-ms N] [--retry-max-ms N] "
		"[--stall-ms N] [--page N] [--direct] [--unsigned-payload] "
		"[--threads N] [--piece N] [--delay-ms N] [--progress] URI "
		"put|put-if-absent|get|stat|list|delete|gc|append|caps "
		"ARGS\n");
	exit(2);
}

static long number(const char *s, long min, long max)
{
	long v;
	if (!s || dpt__parse_long(s, min, max, &v)) {
		fprintf(stderr, "storage_tool: bad number '%s'\n", s ? s : "");
		exit(2);
	}
	return v;
}

static int fail(const char *cmd, int rc)
{
	fprintf(stderr, "storage_tool: %s: %s (%s)\n", cmd, dpt_err_name(rc),
		dpt_strerror(rc));
	return 1;
}

static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "storage_tool: cannot read '%s': %s\n", path,
			strerror(errno));
		exit(1);
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0) {
			fprintf(stderr, "storage_tool: cannot read '%s'\n",
				path);
			exit(1);
		}
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
}

struct stripe {
	struct tool *t;
	struct dpt__storage_writer *w;
	const char *data;
	size_t len;
	long id;
	int rc;
};

static void *write_stripe(void *p)
{
	struct stripe *s = p;
	size_t piece = (size_t)s->t->piece;
	for (size_t off = (size_t)s->id * piece; off < s->len && !s->rc;
	     off += piece * (size_t)s->t->threads) {
		size_t n = s->len - off < piece ? s->len - off : piece;
		s->rc = dpt__storage_writer_write_at(s->w, s->data + off, n,
						     off);
		if (!s->rc && s->t->progress) {
			printf("wrote %zu\n", off + n);
			fflush(stdout);
		}
		if (s->t->delay_ms) {
			struct timespec ts = {s->t->delay_ms / 1000,
					      (s->t->delay_ms % 1000) *
						      1000000};
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static int put(struct tool *t, struct dpt__storage *s, const char *key,
	       const char *path)
{
	struct dpt__storage_writer *w;
	struct stripe *st;
	pthread_t *th;
	size_t len;
	char *data = slurp(path, &len);
	int rc;

	rc = dpt__storage_writer_new(s, key, &w);
	if (rc)
		return rc;
	st = calloc((size_t)t->threads, sizeof(*st));
	th = calloc((size_t)t->threads, sizeof(*th));
	for (long i = 0; i < t->threads; i++) {
		st[i] = (struct stripe){t, w, data, len, i, 0};
		pthread_create(&th[i], NULL, write_stripe, &st[i]);
	}
	for (long i = 0; i < t->threads; i++) {
		pthread_join(th[i], NULL);
		if (st[i].rc && !rc)
			rc = st[i].rc;
	}
	if (rc)
		dpt__storage_writer_abort(&w);
	else
		rc = dpt__storage_writer_finish(&w);
	free(st);
	free(th);
	free(data);
	return rc;
}

static int get(struct dpt__storage *s, const char *key, const char *path,
	       const char *off_s, const char *len_s)
{
	uint64_t off = 0, size;
	size_t len;
	char *buf;
	FILE *f;
	int rc;

	if (off_s) {
		off = (uint64_t)number(off_s, 0, INT64_MAX);
		len = (size_t)number(len_s, 0, INT64_MAX);
	} else {
		rc = dpt__storage_stat(s, key, &size);
		if (rc)
			return rc;
		len = (size_t)size;
	}
	buf = malloc(len ? len : 1);
	rc = dpt__storage_read(s, key, off, len, buf);
	if (!rc) {
		f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
		if (!f || fwrite(buf, 1, len, f) != len) {
			fprintf(stderr, "storage_tool: cannot write '%s'\n",
				path);
			rc = DPT_EIO;
		}
		if (f && f != stdout)
			fclose(f);
	}
	free(buf);
	return rc;
}

/* Each of the N LINES and a newline, one append each. */
static int append(struct dpt__storage *s, const char *key, char **lines, int n)
{
	struct dpt__storage_appender *a;
	int rc = dpt__storage_appender_new(s, key, &a);

	for (int i = 0; !rc && i < n; i++) {
		size_t len = strlen(lines[i]);
		char *line = malloc(len + 1);

		if (!line) {
			rc = DPT_ENOMEM;
			break;
		}
		memcpy(line, lines[i], len);
		line[len] = '\n';
		rc = dpt__storage_append(a, line, len + 1);
		free(line);
	}
	dpt__storage_appender_destroy(&a);
	return rc;
}

static int print_entry(void *ctx, const char *key, uint64_t size)
{
	(void)ctx;
	printf("%s %llu\n", key, (unsigned long long)size);
	return 0;
}

int main(int argc, char **argv)
{
	struct tool t = {.threads = 1, .piece = 1 << 20};
	struct dpt__storage *s = NULL;
	const char *uri, *cmd;
	int i = 1, rc;

	dpt__log_set_ident("storage_tool");
	dpt__storage_opts_init(&t.opts);
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(o, "--direct") == 0) {
			t.opts.direct_io = true;
			continue;
		}
		if (strcmp(o, "--unsigned-payload") == 0) {
			t.opts.unsigned_payload = true;
			continue;
		}
		if (strcmp(o, "--progress") == 0) {
			t.progress = true;
			continue;
		}
		i++;
		if (strcmp(o, "--part-size") == 0)
			t.opts.part_size = (size_t)number(v, 1, 1L << 40);
		else if (strcmp(o, "--inflight") == 0)
			t.opts.max_inflight = (int)number(v, 1, 1000);
		else if (strcmp(o, "--retries") == 0)
			t.opts.retries = (int)number(v, -1, 100);
		else if (strcmp(o, "--retry-base-ms") == 0)
			t.opts.retry_base_ms = number(v, 1, 1000000);
		else if (strcmp(o, "--retry-max-ms") == 0)
			t.opts.retry_max_ms = number(v, 1, 1000000);
		else if (strcmp(o, "--stall-ms") == 0)
			t.opts.stall_timeout_ms = number(v, 1, 10000000);
		else if (strcmp(o, "--page") == 0)
			t.opts.list_page_size = (int)number(v, 1, 100000);
		else if (strcmp(o, "--threads") == 0)
			t.threads = number(v, 1, 256);
		else if (strcmp(o, "--piece") == 0)
			t.piece = number(v, 1, 1L << 40);
		else if (strcmp(o, "--delay-ms") == 0)
			t.delay_ms = number(v, 0, 100000);
		else
			usage();
	}
	if (argc - i < 2)
		usage();
	uri = argv[i++];
	cmd = argv[i++];
	rc = dpt__storage_open(uri, &t.opts, &s);
	if (rc)
		return fail("open", rc);
	if (strcmp(cmd, "put") == 0 && argc - i == 2) {
		rc = put(&t, s, argv[i], argv[i + 1]);
	} else if (strcmp(cmd, "put-if-absent") == 0 && argc - i == 2) {
		size_t len;
		char *data = slurp(argv[i + 1], &len);
		rc = dpt__storage_put_if_absent(s, argv[i], data, len);
		free(data);
	} else if (strcmp(cmd, "get") == 0 &&
		   (argc - i == 2 || argc - i == 4)) {
		rc = get(s, argv[i], argv[i + 1],
			 argc - i == 4 ? argv[i + 2] : NULL,
			 argc - i == 4 ? argv[i + 3] : NULL);
	} else if (strcmp(cmd, "stat") == 0 && argc - i == 1) {
		uint64_t size;
		rc = dpt__storage_stat(s, argv[i], &size);
		if (!rc)
			printf("%llu\n", (unsigned long long)size);
	} else if (strcmp(cmd, "list") == 0 && argc - i <= 1) {
		rc = dpt__storage_list(s, argc - i ? argv[i] : "", print_entry,
				       NULL);
	} else if (strcmp(cmd, "delete") == 0 && argc - i >= 1) {
		rc = dpt__storage_delete(s, (const char *const *)argv + i,
					 (size_t)(argc - i));
	} else if (strcmp(cmd, "gc") == 0 && argc - i == 2) {
		size_t removed = 0;
		rc = dpt__storage_gc(s, argv[i],
				     number(argv[i + 1], 0, INT32_MAX),
				     &removed);
		if (!rc)
			printf("%zu\n", removed);
	} else if (strcmp(cmd, "append") == 0 && argc - i >= 2) {
		rc = append(s, argv[i], argv + i + 1, argc - i - 1);
	} else if (strcmp(cmd, "caps") == 0 && argc - i == 0) {
		printf("%s\n", dpt__storage_caps(s) & DPT__STORAGE_CAP_APPEND
				       ? "append"
				       : "rewrite");
	} else {
		dpt__storage_destroy(&s);
		usage();
	}
	dpt__storage_destroy(&s);
	return rc ? fail(cmd, rc) : 0;
}
