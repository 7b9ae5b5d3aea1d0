#include "config.h"

#include <dptrain/error.h>

const char *dpt_strerror(int err)
{
	switch (err) {
	case DPT_OK:
		return "success";
#define DPT_ERRNO_STR(name, num, msg)                                          \
	case DPT_##name:                                                       \
		return msg;
		DPT_ERRNO_MAP(DPT_ERRNO_STR)
#undef DPT_ERRNO_STR
	}
	return "unknown error";
}

const char *dpt_err_name(int err)
{
	switch (err) {
	case DPT_OK:
		return "DPT_OK";
#define DPT_ERRNO_NAME(name, num, msg)                                         \
	case DPT_##name:                                                       \
		return "DPT_" #name;
		DPT_ERRNO_MAP(DPT_ERRNO_NAME)
#undef DPT_ERRNO_NAME
	}
	return "DPT_UNKNOWN";
}
