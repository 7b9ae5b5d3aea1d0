/*
 * One JSON object on one line, built field by field in a struct dpt__buf:
 * the run's events (doc/checkpoint-format.md, "Events"). Strings are
 * escaped so that any bytes give valid JSON: '"', '\\', control
 * characters and bytes above 0x7e as \u00XX (a byte that is not ASCII is
 * read as Latin-1: the line stays valid whatever a host name holds).
 * Each function returns 0 or DPT_ETOOBIG (the buffer's cap), after which
 * the line is incomplete and must be dropped.
 */
#ifndef DPT_COMMON_JSONL_H
#define DPT_COMMON_JSONL_H

#include <stdint.h>

#include "buf.h"

/* Empties B and starts an object: "{". */
int dpt__jsonl_begin(struct dpt__buf *b);
/* "KEY":"VALUE", or "KEY":null when VALUE is NULL. */
int dpt__jsonl_str(struct dpt__buf *b, const char *key, const char *value);
int dpt__jsonl_u64(struct dpt__buf *b, const char *key, uint64_t value);
int dpt__jsonl_i64(struct dpt__buf *b, const char *key, int64_t value);
/* A number with DECIMALS digits after the point (0..9); a value that is
 * not finite is written null (JSON has no NaN). */
int dpt__jsonl_num(struct dpt__buf *b, const char *key, double value,
		   int decimals);
/* A number in %.9g (shortest of plain and exponent form, both JSON);
 * null when VALUE is not finite. */
int dpt__jsonl_real(struct dpt__buf *b, const char *key, double value);
int dpt__jsonl_null(struct dpt__buf *b, const char *key);
/* "KEY":{ , the start of a nested object; close it with
 * dpt__jsonl_close. */
int dpt__jsonl_open(struct dpt__buf *b, const char *key);
int dpt__jsonl_close(struct dpt__buf *b);
/* Ends the object and the line: "}\n". */
int dpt__jsonl_end(struct dpt__buf *b);

#endif
