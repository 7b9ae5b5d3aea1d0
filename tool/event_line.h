/*
 * One line of the run's events, as `dptrain status` and `dptrain plot`
 * read it: the event recognised by its name and the fields read by the
 * ids of common/event_log.h, the definition the coordinator writes from
 * (doc/checkpoint-format.md, "Events").
 */
#ifndef DPT_TOOL_EVENT_LINE_H
#define DPT_TOOL_EVENT_LINE_H

#include <stddef.h>

#include <jansson.h>

#include "event_log.h"

struct dpt__event_line {
	json_t *obj;	       /* the line, owned */
	enum dpt__event event; /* DPT_EV_COUNT: a kind this build does not
				  know (a newer writer's) */
	const char *name;      /* the line's "event", owned by OBJ */
};

/*
 * dpt__event_line_parse - parse LINE (LEN bytes, no newline needed) into
 * *L. Returns 0, or -1 for a line that is no JSON object with an "event"
 * string (a partial last line): *L is then empty and needs no release.
 */
int dpt__event_line_parse(struct dpt__event_line *l, const char *line,
			  size_t len);
void dpt__event_line_release(struct dpt__event_line *l);

/* Field F as a number: DFLT when it is absent, null or not a number (a
 * kind that is no number is a bug of the caller's: asserted). */
double dpt__event_num(const struct dpt__event_line *l, enum dpt__event_field f,
		      double dflt);

/* Field F as a string, owned by L: NULL when absent, null or no string. */
const char *dpt__event_str(const struct dpt__event_line *l,
			   enum dpt__event_field f);

/* The object of a field of kind SCALARS, owned by L, or NULL. */
json_t *dpt__event_object(const struct dpt__event_line *l,
			  enum dpt__event_field f);

#endif
