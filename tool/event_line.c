/*
 * One line of the run's events: see event_line.h.
 */
#include "config.h"

#include "assertion.h"
#include "event_line.h"

int dpt__event_line_parse(struct dpt__event_line *l, const char *line,
			  size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	json_t *e = json_object_get(o, dpt__event_key(DPT_EVF_EVENT));

	l->obj = NULL;
	l->name = NULL;
	l->event = (enum dpt__event)DPT_EV_COUNT;
	if (!json_is_object(o) || !json_is_string(e)) {
		json_decref(o);
		return -1;
	}
	l->obj = o;
	l->name = json_string_value(e);
	l->event = dpt__event_by_name(l->name);
	return 0;
}

void dpt__event_line_release(struct dpt__event_line *l)
{
	json_decref(l->obj);
	l->obj = NULL;
	l->name = NULL;
}

double dpt__event_num(const struct dpt__event_line *l, enum dpt__event_field f,
		      double dflt)
{
	enum dpt__event_kind k = dpt__event_kind(f);
	json_t *v;

	DPT_ASSERT(k != DPT_EVK_STR && k != DPT_EVK_SCALARS);
	v = json_object_get(l->obj, dpt__event_key(f));
	return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *dpt__event_str(const struct dpt__event_line *l,
			   enum dpt__event_field f)
{
	json_t *v;

	DPT_ASSERT(dpt__event_kind(f) == DPT_EVK_STR);
	v = json_object_get(l->obj, dpt__event_key(f));
	return json_is_string(v) ? json_string_value(v) : NULL;
}

json_t *dpt__event_object(const struct dpt__event_line *l,
			  enum dpt__event_field f)
{
	json_t *v;

	DPT_ASSERT(dpt__event_kind(f) == DPT_EVK_SCALARS);
	v = json_object_get(l->obj, dpt__event_key(f));
	return json_is_object(v) ? v : NULL;
}
