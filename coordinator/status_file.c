/*
 * The job's status files in the owner's status directory (doc/protocol.md,
 * "Status requests"): JOB.live while the step runs (where `dptrain status`
 * finds this coordinator and the key that lets it ask STATUS), JOB.run
 * after it (the run, findable by job id once the job is queued again or
 * finished).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "log.h"
#include "service.h"

/* The directory of the status files: $DPTRAIN_STATUS_DIR, else
 * ~/.dptrain/jobs (doc/protocol.md, "Status requests"), created 0700. */
static int status_dir(char *buf, size_t size)
{
	const char *d = getenv("DPTRAIN_STATUS_DIR"), *home = getenv("HOME");
	struct passwd *pw;
	char parent[PATH_MAX];

	if (d && *d) {
		if (snprintf(buf, size, "%s", d) >= (int)size)
			return -1;
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -1;
		return 0;
	}
	if (!home || !*home) {
		pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home ||
	    snprintf(parent, sizeof(parent), "%s/.dptrain", home) >=
		    (int)sizeof(parent) ||
	    snprintf(buf, size, "%s/jobs", parent) >= (int)size)
		return -1;
	if ((mkdir(parent, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(buf, 0700) != 0 && errno != EEXIST))
		return -1;
	return 0;
}

/* Write DIR/JOB.SUFFIX with TEXT, 0600, whole or not at all. */
static int write_private(const char *dir, long job, const char *suffix,
			 const char *text)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%ld.%s", dir, job, suffix) >=
	    (int)sizeof(path))
		return -1;
	return dpt__file_replace(path, text, strlen(text), 0600) ? -1 : 0;
}

/* DIR/JOB.live, readable by the owner (and root) only. */
void dpt__status_file_write(struct dpt__service *s)
{
	const struct options *o = &s->o;
	char *dir = s->status_dir;
	char text[DPT_ENDPOINT_MAX + 256], port[32] = "";

	dir[0] = '\0';
	if (!o->job_id)
		return;
	if (status_dir(dir, sizeof(s->status_dir)) != 0) {
		dpt__warn("cannot create the status directory '%s': %s "
			  "(dptrain status cannot reach this job)",
			  dir, strerror(errno));
		dir[0] = '\0';
		return;
	}
	if (s->metrics_port >= 0)
		snprintf(port, sizeof(port), "metrics_port=%d\n",
			 s->metrics_port);
	snprintf(text, sizeof(text),
		 "endpoint=%s\nserver_key=%s\npublic_key=%s\nsecret_key=%s\n"
		 "pid=%ld\n%s",
		 s->endpoint, s->keys.coord_public, s->keys.status_public,
		 s->keys.status_secret, (long)getpid(), port);
	if (write_private(dir, o->job_id, "live", text) != 0)
		dpt__warn("cannot write the status file in '%s': %s (dptrain "
			  "status cannot reach this job)",
			  dir, strerror(errno));
	explicit_bzero(text, sizeof(text));
}

/* JOB.run with the run's name, and JOB.live gone. */
void dpt__status_file_end(struct dpt__service *s)
{
	const char *run = s->rep.events ? dpt__events_run(s->rep.events) : NULL;
	char path[PATH_MAX + 32];

	if (!s->status_dir[0])
		return;
	if (run) {
		char text[DPT_WIRE_TEXT_MAX + 8];

		snprintf(text, sizeof(text), "run=%s\n", run);
		write_private(s->status_dir, s->o.job_id, "run", text);
	}
	snprintf(path, sizeof(path), "%s/%ld.live", s->status_dir, s->o.job_id);
	unlink(path);
}
