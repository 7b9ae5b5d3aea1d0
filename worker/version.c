#include "config.h"

#include <dptrain/dptrain.h>

const char *dpt_version(void)
{
	return PACKAGE_VERSION;
}

size_t dpt_dtype_size(enum dpt_dtype dtype)
{
	switch (dtype) {
	case DPT_FLOAT32:
	case DPT_INT32:
		return 4;
	case DPT_FLOAT64:
	case DPT_INT64:
		return 8;
	case DPT_BFLOAT16:
	case DPT_FLOAT16:
		return 2;
	case DPT_UINT8:
		return 1;
	}
	return 0;
}
