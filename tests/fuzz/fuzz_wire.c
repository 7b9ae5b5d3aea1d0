/*
 * libFuzzer target for the wire decoder. Any input must decode or be
 * refused without a crash, a leak or an out-of-bounds read (ASan/UBSan);
 * what decodes must encode back to exactly the same bytes, so that no two
 * encodings mean the same message.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t limits[] = {DPT_WIRE_IN_MAX, DPT_WIRE_MSG_MAX};

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		struct dpt__msg m;
		uint8_t *again;
		size_t n;

		if (dpt__wire_decode(data, size, limits[i], &m) != 0)
			continue;
		n = dpt__wire_size(&m);
		if (n != size)
			abort();
		again = malloc(n);
		if (!again)
			abort();
		if (dpt__wire_encode(&m, again, n) != (long)n ||
		    memcmp(again, data, n) != 0)
			abort();
		free(again);
		dpt__msg_release(&m);
	}
	return 0;
}
