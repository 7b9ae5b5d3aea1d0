/*
 * Files that readers see whole or not at all.
 */
#ifndef DPT_COMMON_FILE_H
#define DPT_COMMON_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Replaces PATH with the LEN bytes of DATA, mode MODE whatever the umask:
 * written to a temporary file beside it (.NAME.XXXXXX), flushed to disk
 * and renamed over PATH, so that a reader sees the old file or the whole
 * new one. Returns 0, or the errno value of the step that failed (the
 * temporary file is removed then). */
int dpt__file_replace(const char *path, const void *data, size_t len,
		      mode_t mode);

#endif
