/*
 * dptrain error codes.
 *
 * Every fallible function of the public API returns 0 on success or one of
 * these negative codes. The list below is the only place where codes and
 * their messages are defined: the enum and dpt_strerror() are both generated
 * from it, so they cannot drift apart.
 */
#ifndef DPTRAIN_ERROR_H
#define DPTRAIN_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DPT_BUILDING) && defined(__GNUC__)
#define DPT_EXPORT __attribute__((visibility("default")))
#else
#define DPT_EXPORT
#endif

/* XX(name, number, message): messages are lowercase, no final period. */
#define DPT_ERRNO_MAP(XX)                                                      \
	XX(EINVAL, 1, "invalid argument")                                      \
	XX(ENOMEM, 2, "out of memory")                                         \
	XX(ERANGE, 3, "value out of range")                                    \
	XX(ESYS, 4, "system call failed")                                      \
	XX(EIO, 5, "input/output error")                                       \
	XX(ENOSPC, 6, "no space left on storage")                              \
	XX(ENOENT, 7, "not found")                                             \
	XX(EEXIST, 8, "already exists")                                        \
	XX(EPROTO, 9, "malformed protocol message")                            \
	XX(EVERSION, 10, "protocol version mismatch")                          \
	XX(EAUTH, 11, "authentication failed")                                 \
	XX(ETIMEDOUT, 12, "timed out")                                         \
	XX(EPEERLOST, 13, "a peer of this generation was lost")                \
	XX(ECOORDLOST, 14, "lost contact with the coordinator")                \
	XX(EGENERATION, 15, "the generation has ended")                        \
	XX(ECORRUPT, 16, "checksum mismatch: data is damaged")                 \
	XX(EBUSY, 17, "operation already in progress")                         \
	XX(ECONFIG, 18, "invalid configuration")                               \
	XX(ENOTSUP, 19, "not supported by this build or backend")              \
	XX(ENCCL, 20, "nccl call failed")                                      \
	XX(ECUDA, 21, "cuda call failed")                                      \
	XX(ES3, 22, "s3 request failed")                                       \
	XX(ECLOSED, 23, "connection closed")                                   \
	XX(ETOOBIG, 24, "message or value too large")                          \
	XX(EMISMATCH, 25, "the checkpoint does not hold the registered tensors")

enum dpt_error {
	DPT_OK = 0,
#define DPT_ERRNO_ENUM(name, num, msg) DPT_##name = -(num),
	DPT_ERRNO_MAP(DPT_ERRNO_ENUM)
#undef DPT_ERRNO_ENUM
};

/*
 * dpt_strerror - the message for an error code.
 * Returns a static string that the caller must not free; an unknown code
 * gives "unknown error".
 */
DPT_EXPORT const char *dpt_strerror(int err);

/*
 * dpt_err_name - the symbolic name of an error code ("DPT_EINVAL").
 * Returns a static string; an unknown code gives "DPT_UNKNOWN".
 */
DPT_EXPORT const char *dpt_err_name(int err);

/*
 * dpt_last_error - what the library last logged as an error in the
 * calling thread, without the log's time and prefix: the cause that an
 * error code alone hides ("cannot create directory '/ckpt/run':
 * Permission denied" behind DPT_EIO). An error of the background writer
 * of a checkpoint reaches the thread that calls dpt_ckpt_wait (or
 * dpt_ckpt_step, dpt_ckpt_poll) with the save's result. Read it right
 * after a call that failed, as errno: a call that succeeds does not clear
 * it, and a call may fail without logging (then it still holds an older
 * message): clear it with dpt_last_error_clear before the call to be
 * sure. Returns a string owned by the thread, valid until its next
 * libdptrain call; "" when nothing was logged since the last clear.
 */
DPT_EXPORT const char *dpt_last_error(void);

/* dpt_last_error_clear - dpt_last_error() returns "" until the calling
 * thread's next error. */
DPT_EXPORT void dpt_last_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
