/*
 * The coordinator protocol's messages (doc/protocol.md): the only encoder
 * and decoder of them, used by the coordinator, the worker library and the
 * SPANK plugin. The decoder treats its input as hostile: it checks every
 * length and range before it reads a field, never reads past the input, and
 * allocates at most what the limits below allow.
 *
 * Also here, because all three components need them: the CURVE keys that
 * derive from a step's secret, and (implemented in common/client.c) the
 * one-request client with which the plugin reports a task's exit and
 * exchanges MASTER_ADDR/MASTER_PORT.
 */
#ifndef DPT_COMMON_WIRE_H
#define DPT_COMMON_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define DPT_HOST_MAX 64

/* One rank's entry in a generation's roster (ROSTER; a JOIN carries the
 * sender's own). */
struct dpt__peer {
	char host[DPT_HOST_MAX]; /* numeric IPv4/IPv6 address of the data
				    plane */
	uint16_t port;		 /* data-plane TCP port */
	uint32_t node; /* index of the node; equal nodes share memory */
};

#define DPT_WIRE_MAGIC0	  0x44 /* 'D' */
#define DPT_WIRE_MAGIC1	  0x50 /* 'P' */
#define DPT_WIRE_VERSION  4
#define DPT_WIRE_HDR_SIZE 16
/* Largest message a coordinator accepts (a JOIN is at most 166 bytes). */
#define DPT_WIRE_IN_MAX 1024
/* Largest message a worker accepts: a roster of DPT_WIRE_WORLD_MAX ranks. */
#define DPT_WIRE_MSG_MAX   (8u << 20)
#define DPT_WIRE_WORLD_MAX 65536
#define DPT_WIRE_TEXT_MAX  255
#define DPT_WIRE_NAME_MAX  63
#define DPT_NCCL_ID_SIZE   128
#define DPT_WIRE_NO_RANK   0xffffffffu
#define DPT_WIRE_NO_TASK   0xffffffffu

/* XX(NAME, number, from worker, from coordinator): numbers are the wire's,
 * never renumber. */
#define DPT_WIRE_TYPE_MAP(XX)                                                  \
	XX(JOIN, 1, 1, 0)                                                      \
	XX(WELCOME, 2, 0, 1)                                                   \
	XX(ROSTER, 3, 0, 1)                                                    \
	XX(UNIQUE_ID, 4, 1, 1)                                                 \
	XX(BARRIER, 5, 1, 0)                                                   \
	XX(BARRIER_DONE, 6, 0, 1)                                              \
	XX(HEARTBEAT, 7, 1, 1)                                                 \
	XX(GEN_END, 8, 0, 1)                                                   \
	XX(LEAVE, 9, 1, 0)                                                     \
	XX(TASK_EXIT, 10, 1, 0)                                                \
	XX(ACK, 11, 0, 1)                                                      \
	XX(FAULT, 12, 1, 0)                                                    \
	XX(ERROR, 13, 0, 1)                                                    \
	XX(KV_PUT, 14, 1, 0)                                                   \
	XX(KV_GET, 15, 1, 0)                                                   \
	XX(KV_VALUE, 16, 0, 1)                                                 \
	XX(VOTE, 17, 1, 0)                                                     \
	XX(VOTE_DONE, 18, 0, 1)                                                \
	XX(STATUS, 19, 1, 0)                                                   \
	XX(STATUS_REPLY, 20, 0, 1)

enum dpt__msg_type {
#define DPT_WIRE_TYPE_ENUM(name, num, w, c) DPT_MSG_##name = num,
	DPT_WIRE_TYPE_MAP(DPT_WIRE_TYPE_ENUM)
#undef DPT_WIRE_TYPE_ENUM
};

/* JOIN caps bits. */
#define DPT_CAP_CPU  0x1u
#define DPT_CAP_NCCL 0x2u
/* WELCOME backend values. */
#define DPT_BACKEND_CPU	 1
#define DPT_BACKEND_NCCL 2
/* WELCOME flags bits. */
#define DPT_WELCOME_CREATE_ID 0x1u

/* GEN_END reasons. */
enum dpt__gen_end_reason {
	DPT_END_PEER_LOST = 1,
	DPT_END_TASK_EXIT = 2,
	DPT_END_FAULT = 3,
	DPT_END_GROW = 4,
	DPT_END_LEFT = 5,
	DPT_END_EVICTED = 6,
};

struct dpt__msg_join {
	uint32_t node;
	uint32_t local_rank;
	uint32_t task_id; /* DPT_WIRE_NO_TASK when unknown */
	uint32_t pid;
	uint32_t caps;
	struct dpt__peer addr; /* addr.node is not sent: it is NODE */
	char name[DPT_WIRE_NAME_MAX + 1];
};

struct dpt__msg_welcome {
	uint32_t rank;
	uint32_t world;
	uint32_t local_rank;
	uint32_t local_world;
	uint8_t backend;
	uint8_t flags;
	uint32_t heartbeat_ms;
	uint32_t timeout_ms;
};

struct dpt__msg_text {
	int32_t code;	    /* ERROR: a dpt_error; GEN_END: the reason */
	uint32_t lost_rank; /* GEN_END only */
	char text[DPT_WIRE_TEXT_MAX + 1];
};

struct dpt__msg_task_exit {
	uint32_t task_id;
	int32_t status;
};

/* KV_PUT, KV_GET (VALUE empty), KV_VALUE (WAIT_MS 0). */
#define DPT_KV_KEY_MAX	 DPT_WIRE_NAME_MAX
#define DPT_KV_VALUE_MAX DPT_WIRE_TEXT_MAX
#define DPT_KV_WAIT_MAX	 300000u
/*
 * Keys under this prefix are the library's reports of what its run did
 * (doc/walltime.md, "Requeue guard"): a later put replaces the value, where
 * any other key keeps its first one.
 */
#define DPT_KV_STATUS_PREFIX "dptrain."
#define DPT_KV_RESUMED	     "dptrain.resumed"	 /* loaded step, or "none" */
#define DPT_KV_COMMITTED     "dptrain.committed" /* "STEP BYTES MS" */
#define DPT_KV_RUN	     "dptrain.run"	 /* the run's URI */
/* Rank 0's logged scalars: whole records of common/scalars.h, each put a
 * new batch (the coordinator writes them as "log" events). */
#define DPT_KV_LOG "dptrain.log"
/* The run's total steps, as the program declared it ("N"). */
#define DPT_KV_TOTAL_STEPS "dptrain.total_steps"
/* The samples of one global step, as the program declared it ("B"). */
#define DPT_KV_GLOBAL_BATCH "dptrain.global_batch"

struct dpt__msg_kv {
	uint32_t wait_ms;
	char key[DPT_KV_KEY_MAX + 1];
	char value[DPT_KV_VALUE_MAX + 1];
};

/* STATUS_REPLY (doc/protocol.md, "Status requests"). */
enum dpt__status_state {
	DPT_STATUS_GATHERING = 1,
	DPT_STATUS_ID_WAIT = 2,
	DPT_STATUS_RUNNING = 3,
	DPT_STATUS_DONE = 4,
};
#define DPT_STATUS_STOPPING 0x1u
#define DPT_STATUS_NO_STEP  UINT64_MAX
struct dpt__msg_status {
	uint8_t state; /* enum dpt__status_state */
	uint8_t flags; /* DPT_STATUS_STOPPING */
	uint32_t job_id;
	uint32_t restarts;
	uint32_t world; /* members of the live generation, 0 while none */
	uint32_t nodes;
	uint32_t expected;     /* --world-size */
	uint64_t step;	       /* newest step known, DPT_STATUS_NO_STEP */
	uint64_t committed;    /* newest committed, DPT_STATUS_NO_STEP */
	uint64_t committed_at; /* Unix ms, 0: never */
	uint64_t started_at;   /* Unix ms */
	uint64_t end_time;     /* Unix s, 0: none known */
	uint32_t generation;   /* the live (or last) generation */
	uint64_t stop_at;      /* Unix s: end_time - grace, 0: none known */
	uint64_t next_save;    /* Unix ms of the next periodic SAVE, 0: none */
	char run[DPT_WIRE_TEXT_MAX + 1];
	char hosts[DPT_WIRE_TEXT_MAX + 1];
	char last[DPT_WIRE_TEXT_MAX + 1];
};

/* VOTE and VOTE_DONE. */
struct dpt__msg_vote {
	int32_t code;	 /* VOTE: 0 or a dpt_error; VOTE_DONE: the first one */
	uint32_t failed; /* VOTE_DONE: members whose code was not 0 */
	uint32_t flags;	 /* DPT_VOTE_*: VOTE STOP and BUSY, VOTE_DONE all */
};

/* Vote flags. STOP: this member asks the step to stop (VOTE, from
 * dpt_request_stop, since protocol 3), the step must stop (VOTE_DONE: its
 * job's end time is within the grace, or a member asked; doc/walltime.md).
 * SAVE: this member asks for a periodic checkpoint now (VOTE, rank 0
 * under --dp-ckpt-every=auto, since protocol 4), a periodic checkpoint
 * is due (VOTE_DONE: --ckpt-every, or a member asked). BUSY: this member's
 * (VOTE), some member's (VOTE_DONE) checkpoint is still being written. */
#define DPT_VOTE_STOP 0x1u
#define DPT_VOTE_SAVE 0x2u
#define DPT_VOTE_BUSY 0x4u

/*
 * A decoded message, or one to encode. Only the member of the union that
 * TYPE names is meaningful. A decoded ROSTER owns ROSTER (WORLD entries);
 * dpt__msg_release frees it. To encode a roster, point ROSTER at the
 * caller's array: the encoder only reads it.
 */
struct dpt__msg {
	uint8_t version; /* set by the decoder, also on DPT_EVERSION */
	uint8_t type;
	uint32_t generation;
	uint32_t seq;
	union {
		struct dpt__msg_join join;
		struct dpt__msg_welcome welcome;
		struct dpt__msg_text text; /* GEN_END, ERROR */
		struct dpt__msg_task_exit task_exit;
		struct dpt__msg_kv kv;
		int32_t fault_code;
		struct dpt__msg_vote vote;
		struct dpt__msg_status status;
		uint8_t unique_id[DPT_NCCL_ID_SIZE];
	} u;
	uint32_t world;		  /* ROSTER */
	struct dpt__peer *roster; /* ROSTER */
};

/* "JOIN", ...; "UNKNOWN" for a number that is no type. Static string. */
const char *dpt__msg_type_name(unsigned type);
/* Whether a worker may send TYPE, and whether a coordinator may. */
int dpt__msg_from_worker(unsigned type);
int dpt__msg_from_coordinator(unsigned type);

/* Set *M to an empty message of TYPE about GENERATION. */
void dpt__msg_init(struct dpt__msg *m, enum dpt__msg_type type,
		   uint32_t generation);
/* Free what a decoded message owns; M stays valid as an empty message. */
void dpt__msg_release(struct dpt__msg *m);

/*
 * The encoded size of M, header included, or 0 when M cannot be encoded
 * (unknown type, a field out of range, a string too long).
 */
size_t dpt__wire_size(const struct dpt__msg *m);

/*
 * Encode M into BUF (SIZE bytes). Returns the number of bytes written, or
 * a negative dpt_error: DPT_EINVAL when M cannot be encoded, DPT_ETOOBIG
 * when SIZE is less than dpt__wire_size(M).
 */
long dpt__wire_encode(const struct dpt__msg *m, void *buf, size_t size);

/*
 * Decode one message of LEN bytes. MAX is the largest message the caller
 * accepts (DPT_WIRE_IN_MAX in a coordinator, DPT_WIRE_MSG_MAX in a worker).
 * Returns 0 and fills *M (release it with dpt__msg_release), or:
 * DPT_ETOOBIG (LEN > MAX), DPT_EVERSION (a dptrain header of another
 * version: M->version and M->type are set so that the caller can say so),
 * DPT_EPROTO (anything else that is not a valid message), DPT_ENOMEM.
 * On error *M holds nothing to release.
 */
int dpt__wire_decode(const void *buf, size_t len, size_t max,
		     struct dpt__msg *m);

/* ---------------------------------------------------------------- keys */

#define DPT_SECRET_HEX_LEN 64
#define DPT_Z85_KEY_LEN	   40

/* The CURVE keys of a step, Z85-encoded and NUL-terminated. */
struct dpt__curve_keys {
	char coord_public[DPT_Z85_KEY_LEN + 1];
	char coord_secret[DPT_Z85_KEY_LEN + 1];
	char worker_public[DPT_Z85_KEY_LEN + 1];
	char worker_secret[DPT_Z85_KEY_LEN + 1];
	/* The status client's pair: lets a client ask STATUS, nothing else
	 * (doc/protocol.md, "Status requests"). */
	char status_public[DPT_Z85_KEY_LEN + 1];
	char status_secret[DPT_Z85_KEY_LEN + 1];
};

/*
 * Derive the step's key pairs from SECRET_HEX (exactly 64 hex characters).
 * Returns 0, DPT_EINVAL for a malformed secret, DPT_ENOTSUP when libzmq has
 * no CURVE. The caller should wipe *KEYS (explicit_bzero) when done.
 */
int dpt__wire_derive_keys(const char *secret_hex, struct dpt__curve_keys *keys);

/*
 * Read a secret file: 64 hex characters, optionally followed by a newline.
 * OUT receives them NUL-terminated. Returns 0, DPT_ENOENT, DPT_EIO, or
 * DPT_EINVAL when the content is not a secret (the file's name and the
 * reason are logged).
 */
int dpt__wire_read_secret_file(const char *path,
			       char out[DPT_SECRET_HEX_LEN + 1]);

#endif
