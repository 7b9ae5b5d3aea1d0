#include "config.h"

#include <dptrain/dptrain.h>

const char *dpt_version(void)
{
	return PACKAGE_VERSION;
}

size_t dpt_dtype_size(enum dpt_dtype dtype)
{
	switch (dtype) {
	case DPT_UINT8:
	case DPT_BOOL:
	case DPT_INT8:
		return 1;
	case DPT_BFLOAT16:
	case DPT_FLOAT16:
	case DPT_INT16:
	case DPT_UINT16:
		return 2;
	case DPT_FLOAT32:
	case DPT_INT32:
	case DPT_UINT32:
		return 4;
	case DPT_FLOAT64:
	case DPT_INT64:
	case DPT_UINT64:
	case DPT_COMPLEX64:
		return 8;
	case DPT_COMPLEX128:
		return 16;
	}
	return 0;
}
