/*
 * The run's event log: the tables of event_log.h and the writer's walk
 * over them.
 */
#include "config.h"

#include <string.h>

#include <dptrain/error.h>

#include "event_log.h"
#include "jsonl.h"
#include "scalars.h"
#include "wire.h"

static const struct {
	const char *key;
	enum dpt__event_kind kind;
} field_table[] = {
#define X(id, key, kind) [DPT_EVF_##id] = {key, DPT_EVK_##kind},
	DPT_EVENT_FIELD_MAP(X)
#undef X
};

#define F(f) DPT_EVF_##f,
static const enum dpt__event_field common_fields[] = {DPT_EVENT_COMMON(F)};
#define X(id, name, fields)                                                    \
	static const enum dpt__event_field fields_##id[] = {fields};
DPT_EVENT_MAP(X, F)
#undef X
#undef F

#define LEN(a) (sizeof(a) / sizeof((a)[0]))
static const struct {
	const char *name;
	const enum dpt__event_field *fields;
	size_t n;
} event_table[] = {
#define X(id, name, fields)                                                    \
	[DPT_EV_##id] = {name, fields_##id, LEN(fields_##id)},
	DPT_EVENT_MAP(X, )
#undef X
};

const char *dpt__event_key(enum dpt__event_field f)
{
	return (unsigned)f < DPT_EVF_COUNT ? field_table[f].key : NULL;
}

enum dpt__event_kind dpt__event_kind(enum dpt__event_field f)
{
	return (unsigned)f < DPT_EVF_COUNT ? field_table[f].kind : DPT_EVK_STR;
}

const char *dpt__event_name(enum dpt__event e)
{
	return (unsigned)e < DPT_EV_COUNT ? event_table[e].name : NULL;
}

enum dpt__event dpt__event_by_name(const char *name)
{
	for (unsigned e = 0; name && e < DPT_EV_COUNT; e++)
		if (!strcmp(event_table[e].name, name))
			return (enum dpt__event)e;
	return (enum dpt__event)DPT_EV_COUNT;
}

size_t dpt__event_fields(enum dpt__event e,
			 const enum dpt__event_field **fields)
{
	if ((unsigned)e >= DPT_EV_COUNT) {
		*fields = NULL;
		return 0;
	}
	*fields = event_table[e].fields;
	return event_table[e].n;
}

size_t dpt__event_common(const enum dpt__event_field **fields)
{
	*fields = common_fields;
	return LEN(common_fields);
}

static int put_scalars(struct dpt__buf *b, const char *key,
		       const struct dpt__scalars *sc)
{
	int rc;

	if (!sc)
		return dpt__jsonl_null(b, key);
	rc = dpt__jsonl_open(b, key);
	for (size_t i = 0; !rc && i < sc->n; i++)
		rc = dpt__jsonl_real(b, sc->names[i], sc->values[i]);
	return rc ? rc : dpt__jsonl_close(b);
}

/* Field F of value V, by its kind. */
static int put_field(struct dpt__buf *b, enum dpt__event_field f,
		     const struct dpt__event_value *v)
{
	const char *key = field_table[f].key;

	switch (field_table[f].kind) {
	case DPT_EVK_U64:
		return dpt__jsonl_u64(b, key, v->u);
	case DPT_EVK_I64:
		return dpt__jsonl_i64(b, key, v->i);
	case DPT_EVK_STEP:
		return v->u == DPT_STATUS_NO_STEP
			       ? dpt__jsonl_null(b, key)
			       : dpt__jsonl_u64(b, key, v->u);
	case DPT_EVK_RANK:
		return v->u == DPT_WIRE_NO_RANK ? dpt__jsonl_null(b, key)
						: dpt__jsonl_u64(b, key, v->u);
	case DPT_EVK_EPOCH:
		return v->i > 0 ? dpt__jsonl_i64(b, key, v->i)
				: dpt__jsonl_null(b, key);
	case DPT_EVK_STR:
		return dpt__jsonl_str(b, key, v->s);
	case DPT_EVK_SECONDS:
		return dpt__jsonl_num(b, key, v->d, 3);
	case DPT_EVK_RATE:
		return dpt__jsonl_num(b, key, v->d, 0);
	case DPT_EVK_SCALARS:
		return put_scalars(b, key, v->scalars);
	}
	return DPT_EINVAL;
}

static int put_fields(struct dpt__buf *out, enum dpt__event e,
		      const enum dpt__event_field *fields, size_t n,
		      dpt__event_value_fn *value, void *arg)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++) {
		struct dpt__event_value v = {0};

		value(arg, e, fields[i], &v);
		rc = put_field(out, fields[i], &v);
	}
	return rc;
}

int dpt__event_format(struct dpt__buf *out, enum dpt__event e,
		      dpt__event_value_fn *value, void *arg)
{
	const enum dpt__event_field *fields;
	size_t n = dpt__event_fields(e, &fields);
	int rc;

	if (!n)
		return DPT_EINVAL;
	rc = dpt__jsonl_begin(out);
	if (!rc)
		rc = put_fields(out, e, common_fields, LEN(common_fields),
				value, arg);
	if (!rc)
		rc = put_fields(out, e, fields, n, value, arg);
	return rc ? rc : dpt__jsonl_end(out);
}
