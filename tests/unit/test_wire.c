#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "client.h"
#include "wire.h"
#include "tests/testlib.h"

#define SECRET                                                                 \
	"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* Encode M into a fresh buffer; *LEN receives its size. */
static uint8_t *encode(const struct dpt__msg *m, size_t *len)
{
	size_t n = dpt__wire_size(m);
	uint8_t *buf;
	assert_true(n >= DPT_WIRE_HDR_SIZE);
	buf = malloc(n);
	assert_non_null(buf);
	assert_int_equal(dpt__wire_encode(m, buf, n), (long)n);
	*len = n;
	return buf;
}

static void roundtrip(const struct dpt__msg *in, struct dpt__msg *out)
{
	size_t len;
	uint8_t *buf = encode(in, &len);
	assert_int_equal(dpt__wire_decode(buf, len, DPT_WIRE_MSG_MAX, out), 0);
	assert_int_equal(out->version, DPT_WIRE_VERSION);
	assert_int_equal(out->type, in->type);
	assert_int_equal(out->generation, in->generation);
	assert_int_equal(out->seq, in->seq);
	free(buf);
}

static struct dpt__msg join_msg(void)
{
	struct dpt__msg m;
	dpt__msg_init(&m, DPT_MSG_JOIN, 3);
	m.u.join.node = 7;
	m.u.join.local_rank = 2;
	m.u.join.task_id = 58;
	m.u.join.pid = 4242;
	m.u.join.caps = DPT_CAP_CPU | DPT_CAP_NCCL;
	m.u.join.addr.port = 40001;
	snprintf(m.u.join.addr.host, sizeof(m.u.join.addr.host), "%s",
		 "10.1.2.3");
	snprintf(m.u.join.name, sizeof(m.u.join.name), "%s", "node-07.cluster");
	return m;
}

static void every_message_roundtrips(void **state)
{
	struct dpt__msg in, out;
	(void)state;

	in = join_msg();
	roundtrip(&in, &out);
	assert_int_equal(out.u.join.node, 7);
	assert_int_equal(out.u.join.addr.node, 7);
	assert_int_equal(out.u.join.local_rank, 2);
	assert_int_equal(out.u.join.task_id, 58);
	assert_int_equal(out.u.join.pid, 4242);
	assert_int_equal(out.u.join.caps, 3);
	assert_int_equal(out.u.join.addr.port, 40001);
	assert_string_equal(out.u.join.addr.host, "10.1.2.3");
	assert_string_equal(out.u.join.name, "node-07.cluster");

	dpt__msg_init(&in, DPT_MSG_WELCOME, 9);
	in.u.welcome = (struct dpt__msg_welcome){
		.rank = 0,
		.world = 16,
		.local_rank = 0,
		.local_world = 8,
		.backend = DPT_BACKEND_NCCL,
		.flags = DPT_WELCOME_CREATE_ID,
		.heartbeat_ms = 500,
		.timeout_ms = 2000,
	};
	roundtrip(&in, &out);
	assert_memory_equal(&out.u.welcome, &in.u.welcome,
			    sizeof(in.u.welcome));

	dpt__msg_init(&in, DPT_MSG_UNIQUE_ID, 2);
	for (int i = 0; i < DPT_NCCL_ID_SIZE; i++)
		in.u.unique_id[i] = (uint8_t)(i * 7 + 1);
	roundtrip(&in, &out);
	assert_memory_equal(out.u.unique_id, in.u.unique_id, DPT_NCCL_ID_SIZE);

	dpt__msg_init(&in, DPT_MSG_GEN_END, 4);
	in.u.text.code = DPT_END_PEER_LOST;
	in.u.text.lost_rank = 3;
	snprintf(in.u.text.text, sizeof(in.u.text.text), "%s",
		 "rank 3 (node-2, pid 17) missed heartbeats");
	roundtrip(&in, &out);
	assert_int_equal(out.u.text.code, DPT_END_PEER_LOST);
	assert_int_equal(out.u.text.lost_rank, 3);
	assert_string_equal(out.u.text.text, in.u.text.text);

	dpt__msg_init(&in, DPT_MSG_ERROR, 0);
	in.u.text.code = DPT_EVERSION;
	snprintf(in.u.text.text, sizeof(in.u.text.text), "%s",
		 "protocol version 2 is not supported");
	roundtrip(&in, &out);
	assert_int_equal(out.u.text.code, DPT_EVERSION);
	assert_string_equal(out.u.text.text, in.u.text.text);

	dpt__msg_init(&in, DPT_MSG_TASK_EXIT, 0);
	in.seq = 77;
	in.u.task_exit.task_id = 12;
	in.u.task_exit.status = -9;
	roundtrip(&in, &out);
	assert_int_equal(out.u.task_exit.task_id, 12);
	assert_int_equal(out.u.task_exit.status, -9);

	dpt__msg_init(&in, DPT_MSG_FAULT, 5);
	in.u.fault_code = DPT_EPEERLOST;
	roundtrip(&in, &out);
	assert_int_equal(out.u.fault_code, DPT_EPEERLOST);

	dpt__msg_init(&in, DPT_MSG_VOTE, 5);
	in.seq = 3;
	in.u.vote.code = DPT_ENOSPC;
	in.u.vote.flags = DPT_VOTE_BUSY;
	roundtrip(&in, &out);
	assert_int_equal(out.seq, 3);
	assert_int_equal(out.u.vote.code, DPT_ENOSPC);
	assert_int_equal(out.u.vote.flags, DPT_VOTE_BUSY);
	assert_int_equal(dpt__wire_size(&in), DPT_WIRE_HDR_SIZE + 8);
	in.u.vote.flags = DPT_VOTE_STOP | DPT_VOTE_BUSY; /* a rank asks */
	roundtrip(&in, &out);
	assert_int_equal(out.u.vote.flags, DPT_VOTE_STOP | DPT_VOTE_BUSY);
	in.u.vote.flags = DPT_VOTE_SAVE; /* rank 0 asks (protocol 4) */
	roundtrip(&in, &out);
	assert_int_equal(out.u.vote.flags, DPT_VOTE_SAVE);
	in.u.vote.flags = 8; /* no other flag is defined */
	assert_int_equal(dpt__wire_size(&in), 0);

	dpt__msg_init(&in, DPT_MSG_VOTE_DONE, 5);
	in.seq = 3;
	in.u.vote.failed = 2;
	in.u.vote.code = DPT_EIO;
	in.u.vote.flags = DPT_VOTE_STOP | DPT_VOTE_SAVE | DPT_VOTE_BUSY;
	roundtrip(&in, &out);
	assert_int_equal(out.u.vote.failed, 2);
	assert_int_equal(out.u.vote.code, DPT_EIO);
	assert_int_equal(out.u.vote.flags,
			 DPT_VOTE_STOP | DPT_VOTE_SAVE | DPT_VOTE_BUSY);
	assert_int_equal(dpt__wire_size(&in), DPT_WIRE_HDR_SIZE + 12);
	/* No other flag is defined yet. */
	in.u.vote.flags = 8;
	assert_int_equal(dpt__wire_size(&in), 0);

	/* A vote is 0 or an error; a count of failures comes with the first
	 * failure's code and without one none. */
	dpt__msg_init(&in, DPT_MSG_VOTE, 5);
	in.seq = 1;
	in.u.vote.code = 7;
	assert_int_equal(dpt__wire_size(&in), 0);
	dpt__msg_init(&in, DPT_MSG_VOTE_DONE, 5);
	in.seq = 1;
	in.u.vote.failed = 1;
	assert_int_equal(dpt__wire_size(&in), 0);
	in.u.vote.failed = 0;
	in.u.vote.code = DPT_EIO;
	assert_int_equal(dpt__wire_size(&in), 0);

	const enum dpt__msg_type empty[] = {
		DPT_MSG_BARRIER, DPT_MSG_BARRIER_DONE, DPT_MSG_HEARTBEAT,
		DPT_MSG_LEAVE, DPT_MSG_ACK};
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		dpt__msg_init(&in, empty[i], 6);
		in.seq = 1;
		roundtrip(&in, &out);
		assert_int_equal(dpt__wire_size(&in), DPT_WIRE_HDR_SIZE);
	}
}

static void roster_roundtrips_and_is_bounded(void **state)
{
	struct dpt__peer peers[3] = {
		{.host = "10.0.0.1", .port = 1000, .node = 0},
		{.host = "10.0.0.1", .port = 1001, .node = 0},
		{.host = "fe80::1", .port = 65535, .node = 1},
	};
	struct dpt__msg in, out;
	(void)state;

	dpt__msg_init(&in, DPT_MSG_ROSTER, 2);
	in.world = 3;
	in.roster = peers;
	roundtrip(&in, &out);
	assert_int_equal(out.world, 3);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(out.roster[i].host, peers[i].host);
		assert_int_equal(out.roster[i].port, peers[i].port);
		assert_int_equal(out.roster[i].node, peers[i].node);
	}
	dpt__msg_release(&out);
	assert_null(out.roster);

	/* The largest world, with the longest hosts, fits the limit. */
	struct dpt__peer *big = calloc(DPT_WIRE_WORLD_MAX, sizeof(*big));
	assert_non_null(big);
	for (int i = 0; i < DPT_WIRE_WORLD_MAX; i++) {
		memset(big[i].host, '1', DPT_HOST_MAX - 1);
		big[i].port = 1;
	}
	in.world = DPT_WIRE_WORLD_MAX;
	in.roster = big;
	roundtrip(&in, &out);
	assert_int_equal(out.world, DPT_WIRE_WORLD_MAX);
	dpt__msg_release(&out);
	in.world = DPT_WIRE_WORLD_MAX + 1;
	assert_int_equal(dpt__wire_size(&in), 0);
	free(big);
}

static void expect_reject(const uint8_t *buf, size_t len, int want)
{
	struct dpt__msg m;
	int rc = dpt__wire_decode(buf, len, DPT_WIRE_MSG_MAX, &m);
	assert_int_equal(rc, want);
	assert_null(m.roster);
}

static void truncated_and_extended_are_rejected(void **state)
{
	struct dpt__peer peers[2] = {{.host = "127.0.0.1", .port = 5},
				     {.host = "127.0.0.1", .port = 6}};
	struct dpt__msg msgs[3];
	(void)state;

	msgs[0] = join_msg();
	dpt__msg_init(&msgs[1], DPT_MSG_ROSTER, 1);
	msgs[1].world = 2;
	msgs[1].roster = peers;
	dpt__msg_init(&msgs[2], DPT_MSG_ERROR, 1);
	msgs[2].u.text.code = DPT_EBUSY;
	snprintf(msgs[2].u.text.text, sizeof(msgs[2].u.text.text), "%s",
		 "full");

	for (int k = 0; k < 3; k++) {
		size_t len;
		uint8_t *buf = encode(&msgs[k], &len);
		uint8_t *longer = malloc(len + 1);
		assert_non_null(longer);
		/* Every truncation, with the header's length left as is or
		 * patched to match: never valid, never a crash. */
		for (size_t cut = 0; cut < len; cut++) {
			expect_reject(buf, cut, DPT_EPROTO);
			if (cut >= DPT_WIRE_HDR_SIZE) {
				uint32_t b =
					(uint32_t)(cut - DPT_WIRE_HDR_SIZE);
				memcpy(longer, buf, cut);
				longer[12] = (uint8_t)(b >> 24);
				longer[13] = (uint8_t)(b >> 16);
				longer[14] = (uint8_t)(b >> 8);
				longer[15] = (uint8_t)b;
				expect_reject(longer, cut, DPT_EPROTO);
			}
		}
		/* A trailing byte, counted in the header or not. */
		memcpy(longer, buf, len);
		longer[len] = 0;
		expect_reject(longer, len + 1, DPT_EPROTO);
		longer[15]++;
		expect_reject(longer, len + 1, DPT_EPROTO);
		free(longer);
		free(buf);
	}
}

static void header_checks(void **state)
{
	struct dpt__msg in, out;
	size_t len;
	uint8_t *buf;
	(void)state;

	dpt__msg_init(&in, DPT_MSG_HEARTBEAT, 1);
	buf = encode(&in, &len);

	buf[2] = DPT_WIRE_VERSION + 1; /* another version: recognised as such */
	assert_int_equal(dpt__wire_decode(buf, len, 1024, &out), DPT_EVERSION);
	assert_int_equal(out.version, DPT_WIRE_VERSION + 1);
	assert_int_equal(out.type, DPT_MSG_HEARTBEAT);
	buf[2] = DPT_WIRE_VERSION;

	buf[0] = 'X'; /* not ours at all */
	expect_reject(buf, len, DPT_EPROTO);
	buf[0] = DPT_WIRE_MAGIC0;

	for (unsigned t = 0; t < 256; t++) { /* unknown types */
		if (strcmp(dpt__msg_type_name(t), "UNKNOWN") != 0)
			continue;
		buf[3] = (uint8_t)t;
		expect_reject(buf, len, DPT_EPROTO);
	}
	buf[3] = DPT_MSG_HEARTBEAT;

	buf[12] = 0xff; /* a length that lies */
	expect_reject(buf, len, DPT_EPROTO);
	buf[12] = 0;

	assert_int_equal(dpt__wire_decode(buf, len, len, &out), 0);
	/* Larger than the caller accepts, whatever the bytes. */
	assert_int_equal(dpt__wire_decode(buf, len, len - 1, &out),
			 DPT_ETOOBIG);
	free(buf);

	uint8_t *huge = calloc(1, DPT_WIRE_IN_MAX + 1);
	assert_non_null(huge);
	assert_int_equal(dpt__wire_decode(huge, DPT_WIRE_IN_MAX + 1,
					  DPT_WIRE_IN_MAX, &out),
			 DPT_ETOOBIG);
	free(huge);
}

/* Patch byte OFF of the encoding of M and expect a rejection. */
static void patched_is_rejected(const struct dpt__msg *m, size_t off,
				uint8_t value)
{
	size_t len;
	uint8_t *buf = encode(m, &len);
	assert_true(off < len);
	buf[off] = value;
	expect_reject(buf, len, DPT_EPROTO);
	free(buf);
}

static void field_rules(void **state)
{
	struct dpt__msg m;
	(void)state;

	m = join_msg();
	/* JOIN body: node 16, local 20, task 24, pid 28, caps 32, port 36,
	 * host length 38, host 39.. */
	patched_is_rejected(&m, 35, 0);	   /* no caps */
	patched_is_rejected(&m, 35, 4);	   /* unknown cap */
	patched_is_rejected(&m, 39, 'x');  /* not a numeric address */
	patched_is_rejected(&m, 39, '\0'); /* embedded NUL */
	patched_is_rejected(&m, 38, 0);	   /* empty host */
	patched_is_rejected(&m, 38, 64);   /* host longer than the field */
	patched_is_rejected(&m, 48, '\n'); /* control character in the name */

	m.u.join.addr.port = 0; /* a CPU worker needs a data-plane port */
	assert_int_equal(dpt__wire_size(&m), 0);
	m.u.join.caps = DPT_CAP_NCCL;
	assert_true(dpt__wire_size(&m) > 0);
	snprintf(m.u.join.addr.host, sizeof(m.u.join.addr.host), "%s",
		 "host.example"); /* not numeric */
	assert_int_equal(dpt__wire_size(&m), 0);

	dpt__msg_init(&m, DPT_MSG_WELCOME, 1);
	m.u.welcome = (struct dpt__msg_welcome){.rank = 1,
						.world = 2,
						.local_rank = 0,
						.local_world = 1,
						.backend = DPT_BACKEND_CPU,
						.heartbeat_ms = 1,
						.timeout_ms = 1};
	assert_true(dpt__wire_size(&m) > 0);
	/* WELCOME body: rank 16, world 20, local 24, local world 28,
	 * backend 32, flags 33, reserved 34. */
	patched_is_rejected(&m, 19, 2); /* rank == world */
	patched_is_rejected(&m, 23, 0); /* world 0 */
	patched_is_rejected(&m, 32, 3); /* unknown backend */
	patched_is_rejected(&m, 33, 1); /* CREATE_ID for a CPU rank 1 */
	patched_is_rejected(&m, 34, 1); /* reserved bits */
	patched_is_rejected(&m, 31, 3); /* local world > world */
	m.u.welcome.backend = DPT_BACKEND_NCCL;
	m.u.welcome.flags = DPT_WELCOME_CREATE_ID;
	assert_int_equal(dpt__wire_size(&m), 0); /* rank 1 may not create */

	dpt__msg_init(&m, DPT_MSG_BARRIER, 1);
	assert_int_equal(dpt__wire_size(&m), 0); /* barriers count from 1 */

	dpt__msg_init(&m, DPT_MSG_ERROR, 1);
	m.u.text.code = 3; /* codes are negative */
	assert_int_equal(dpt__wire_size(&m), 0);
	m.u.text.code = DPT_EINVAL;
	snprintf(m.u.text.text, sizeof(m.u.text.text), "%s", "ok");
	patched_is_rejected(&m, 21, 0x07); /* a bell in the text */
	memset(m.u.text.text, 'a', DPT_WIRE_TEXT_MAX + 1);
	assert_int_equal(dpt__wire_size(&m), 0); /* not NUL-terminated */

	dpt__msg_init(&m, DPT_MSG_GEN_END, 1);
	m.u.text.code = 99;
	assert_int_equal(dpt__wire_size(&m), 0);

	struct dpt__peer peer = {.host = "1.2.3.4", .port = 9};
	dpt__msg_init(&m, DPT_MSG_ROSTER, 1);
	m.world = 1;
	m.roster = &peer;
	/* A count that the bytes cannot hold is refused before anything is
	 * allocated for it. */
	patched_is_rejected(&m, 16, 0xff);
	patched_is_rejected(&m, 19, 0);
	m.roster = NULL;
	assert_int_equal(dpt__wire_size(&m), 0);

	uint8_t small[8];
	dpt__msg_init(&m, DPT_MSG_HEARTBEAT, 1);
	assert_int_equal(dpt__wire_encode(&m, small, sizeof(small)),
			 DPT_ETOOBIG);
	m.type = 200;
	assert_int_equal(dpt__wire_encode(&m, small, sizeof(small)),
			 DPT_EINVAL);
}

static void directions(void **state)
{
	(void)state;
	assert_true(dpt__msg_from_worker(DPT_MSG_JOIN));
	assert_false(dpt__msg_from_coordinator(DPT_MSG_JOIN));
	assert_true(dpt__msg_from_coordinator(DPT_MSG_ROSTER));
	assert_false(dpt__msg_from_worker(DPT_MSG_ROSTER));
	assert_true(dpt__msg_from_worker(DPT_MSG_UNIQUE_ID));
	assert_true(dpt__msg_from_coordinator(DPT_MSG_UNIQUE_ID));
	assert_false(dpt__msg_from_worker(0));
	assert_false(dpt__msg_from_coordinator(255));
	assert_string_equal(dpt__msg_type_name(DPT_MSG_GEN_END), "GEN_END");
	assert_string_equal(dpt__msg_type_name(0), "UNKNOWN");
}

static void keys_derive_from_the_secret(void **state)
{
	struct dpt__curve_keys a, b;
	char other[] = SECRET;
	(void)state;

	assert_int_equal(dpt__wire_derive_keys(SECRET, &a), 0);
	assert_int_equal(dpt__wire_derive_keys(SECRET, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(strlen(a.coord_public), DPT_Z85_KEY_LEN);
	assert_string_not_equal(a.coord_public, a.worker_public);
	assert_string_not_equal(a.coord_secret, a.worker_secret);

	other[0] = '1';
	assert_int_equal(dpt__wire_derive_keys(other, &b), 0);
	assert_string_not_equal(a.coord_public, b.coord_public);
	assert_string_not_equal(a.worker_public, b.worker_public);

	other[0] = 'g';
	assert_int_equal(dpt__wire_derive_keys(other, &b), DPT_EINVAL);
	assert_int_equal(dpt__wire_derive_keys("abcd", &b), DPT_EINVAL);
	assert_int_equal(dpt__wire_derive_keys(SECRET "0", &b), DPT_EINVAL);
	assert_int_equal(dpt__wire_derive_keys(NULL, &b), DPT_EINVAL);
}

static void secret_files(void **state)
{
	char path[] = "/tmp/dpt-test-wire-XXXXXX";
	char out[DPT_SECRET_HEX_LEN + 1];
	int fd;
	(void)state;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, SECRET "\n", DPT_SECRET_HEX_LEN + 1),
			 DPT_SECRET_HEX_LEN + 1);
	assert_int_equal(dpt__wire_read_secret_file(path, out), 0);
	assert_string_equal(out, SECRET);
	assert_int_equal(ftruncate(fd, 10), 0);
	assert_int_equal(dpt__wire_read_secret_file(path, out), DPT_EINVAL);
	assert_string_equal(out, "");
	close(fd);
	unlink(path);
	assert_int_equal(dpt__wire_read_secret_file(path, out), DPT_ENOENT);
}

static void exit_report_gives_up_in_time(void **state)
{
	struct timespec t0, t1;
	(void)state;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Nobody listens on port 1: the report must time out, not hang. */
	assert_int_equal(
		dpt__client_report_exit("tcp://127.0.0.1:1", SECRET, 3, 0, 200),
		DPT_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 2);
	assert_int_equal(
		dpt__client_report_exit("tcp://127.0.0.1:1", "bad", 3, 0, 200),
		DPT_EINVAL);
}

static struct dpt__msg kv_msg(enum dpt__msg_type type, const char *key,
			      const char *value, uint32_t wait_ms)
{
	struct dpt__msg m;
	dpt__msg_init(&m, type, 0);
	m.seq = 77;
	m.u.kv.wait_ms = wait_ms;
	snprintf(m.u.kv.key, sizeof(m.u.kv.key), "%s", key);
	snprintf(m.u.kv.value, sizeof(m.u.kv.value), "%s", value);
	return m;
}

static void status_messages(void **state)
{
	struct dpt__msg in, out;
	uint8_t buf[1024];
	long n;
	(void)state;

	dpt__msg_init(&in, DPT_MSG_STATUS, 0);
	roundtrip(&in, &out);
	assert_int_equal(out.type, DPT_MSG_STATUS);
	assert_true(dpt__msg_from_worker(DPT_MSG_STATUS));
	assert_true(dpt__msg_from_coordinator(DPT_MSG_STATUS_REPLY));
	assert_false(dpt__msg_from_worker(DPT_MSG_STATUS_REPLY));

	dpt__msg_init(&in, DPT_MSG_STATUS_REPLY, 7);
	in.u.status = status_running("file:///ckpt/runs/a");
	in.u.status.flags = DPT_STATUS_STOPPING;
	in.u.status.generation = 3;
	in.u.status.stop_at = 1700003000; /* 10 minutes before the end */
	in.u.status.next_save = 1700000900000ull;
	snprintf(in.u.status.hosts, sizeof(in.u.status.hosts), "n1,n2");
	n = dpt__wire_encode(&in, buf, sizeof(buf));
	assert_int_equal(n, 16 + 87 + 19 + 5);
	roundtrip(&in, &out);
	assert_memory_equal(&out.u.status, &in.u.status, sizeof(in.u.status));

	/* Field rules: a state in range, known flags, no more nodes than
	 * members, printable texts. */
	in.u.status.state = 0;
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in.u.status.state = DPT_STATUS_DONE;
	in.u.status.flags = 2;
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in.u.status.flags = 0;
	in.u.status.nodes = 5;
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in.u.status.nodes = 1;
	snprintf(in.u.status.last, sizeof(in.u.status.last), "tab here");
	in.u.status.last[3] = '\t';
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
}

static void kv_messages(void **state)
{
	struct dpt__msg in, out;
	char long_key[DPT_KV_KEY_MAX + 2];
	uint8_t buf[1024];
	(void)state;

	in = kv_msg(DPT_MSG_KV_PUT, "master", "10.0.0.1 29500", 0);
	roundtrip(&in, &out);
	assert_string_equal(out.u.kv.key, "master");
	assert_string_equal(out.u.kv.value, "10.0.0.1 29500");
	in = kv_msg(DPT_MSG_KV_GET, "master", "", 120000);
	roundtrip(&in, &out);
	assert_string_equal(out.u.kv.key, "master");
	assert_int_equal(out.u.kv.wait_ms, 120000);
	in = kv_msg(DPT_MSG_KV_VALUE, "master", "", 0);
	roundtrip(&in, &out);
	assert_string_equal(out.u.kv.value, "");
	assert_true(dpt__msg_from_worker(DPT_MSG_KV_PUT));
	assert_true(dpt__msg_from_worker(DPT_MSG_KV_GET));
	assert_true(dpt__msg_from_coordinator(DPT_MSG_KV_VALUE));
	assert_false(dpt__msg_from_worker(DPT_MSG_KV_VALUE));

	/* The field rules: a key is a name, a GET carries no value and a
	 * bounded wait, a PUT or VALUE no wait. */
	in = kv_msg(DPT_MSG_KV_PUT, "", "x", 0);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in = kv_msg(DPT_MSG_KV_PUT, "bad key", "x", 0);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in = kv_msg(DPT_MSG_KV_PUT, "k", "tab\there", 0);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in = kv_msg(DPT_MSG_KV_PUT, "k", "v", 5);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in = kv_msg(DPT_MSG_KV_GET, "k", "v", 5);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	in = kv_msg(DPT_MSG_KV_GET, "k", "", DPT_KV_WAIT_MAX + 1);
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	in = kv_msg(DPT_MSG_KV_GET, "k", "", 1);
	memcpy(in.u.kv.key, long_key, sizeof(in.u.kv.key));
	assert_int_equal(dpt__wire_encode(&in, buf, sizeof(buf)), DPT_EINVAL);

	/* A value whose length byte overruns the message is refused. */
	in = kv_msg(DPT_MSG_KV_PUT, "k", "value", 0);
	long n = dpt__wire_encode(&in, buf, sizeof(buf));
	assert_true(n > 0);
	buf[DPT_WIRE_HDR_SIZE + 2] = 200;
	assert_int_equal(dpt__wire_decode(buf, (size_t)n, sizeof(buf), &out),
			 DPT_EPROTO);
}

static void kv_client_gives_up_in_time(void **state)
{
	char value[64];
	(void)state;

	assert_int_equal(
		dpt__client_kv_put("tcp://127.0.0.1:1", SECRET, "k", "v", 200),
		DPT_ETIMEDOUT);
	assert_int_equal(dpt__client_kv_get("tcp://127.0.0.1:1", SECRET, "k",
					    value, sizeof(value), 300),
			 DPT_ETIMEDOUT);
	assert_int_equal(dpt__client_kv_put("tcp://127.0.0.1:1", SECRET,
					    "bad key", "v", 200),
			 DPT_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_message_roundtrips),
		cmocka_unit_test(roster_roundtrips_and_is_bounded),
		cmocka_unit_test(truncated_and_extended_are_rejected),
		cmocka_unit_test(header_checks),
		cmocka_unit_test(field_rules),
		cmocka_unit_test(directions),
		cmocka_unit_test(keys_derive_from_the_secret),
		cmocka_unit_test(secret_files),
		cmocka_unit_test(exit_report_gives_up_in_time),
		cmocka_unit_test(kv_messages),
		cmocka_unit_test(status_messages),
		cmocka_unit_test(kv_client_gives_up_in_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
