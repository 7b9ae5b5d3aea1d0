/*
 * The fake sender of the coordinator's unit tests (tests/testlib.h): the
 * messages the state machine or the key-value store hands to it, decoded
 * as the peer would decode them (libzmq only for its message buffers).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <zmq.h>

#include "coord.h"
#include "tests/testlib.h"
#include "wire.h"

#define SENT_MAX 8192

static struct sent {
	char to[32];
	struct dpt__msg m;
} sent[SENT_MAX];
static size_t nsent;

static int record(void *arg, const uint8_t *id, size_t id_len, zmq_msg_t *msg)
{
	struct sent *s = &sent[nsent];

	(void)arg;
	assert_true(nsent < SENT_MAX);
	assert_true(id_len < sizeof(s->to));
	memcpy(s->to, id, id_len);
	s->to[id_len] = '\0';
	assert_int_equal(dpt__wire_decode(zmq_msg_data(msg), zmq_msg_size(msg),
					  DPT_WIRE_MSG_MAX, &s->m),
			 0);
	nsent++;
	return 0;
}

const struct dpt__coord_sender recorder = {.send = record};

void sent_clear(void)
{
	for (size_t i = 0; i < nsent; i++)
		dpt__msg_release(&sent[i].m);
	nsent = 0;
}

size_t sent_total(void)
{
	return nsent;
}

int sent_count(const char *to, int type)
{
	int n = 0;

	for (size_t i = 0; i < nsent; i++)
		n += !strcmp(sent[i].to, to) && (int)sent[i].m.type == type;
	return n;
}

const struct dpt__msg *sent_last(const char *to, int type)
{
	for (size_t i = nsent; i-- > 0;)
		if (!strcmp(sent[i].to, to) && (int)sent[i].m.type == type)
			return &sent[i].m;
	fail_msg("no %s was sent to %s", dpt__msg_type_name((unsigned)type),
		 to);
	return NULL;
}

const struct dpt__msg *sent_only(const char *to)
{
	const struct dpt__msg *m = NULL;
	int n = 0;

	for (size_t i = 0; i < nsent; i++)
		if (!strcmp(sent[i].to, to)) {
			m = &sent[i].m;
			n++;
		}
	if (n != 1)
		fail_msg("%d messages to %s, expected 1", n, to);
	return m;
}
