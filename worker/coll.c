/*
 * The collectives backends (worker/coll.h): the list that dpt_init offers
 * the coordinator from and WELCOME's lookup.
 */
#include "config.h"

#include "coll.h"
#include "cpu_comm.h"
#include "nccl.h"

const struct dpt__coll_ops *const dpt__coll_backends[] = {
	&dpt__coll_cpu,
	&dpt__coll_nccl,
	NULL,
};

const struct dpt__coll_ops *dpt__coll_find(uint8_t wire)
{
	for (int i = 0; dpt__coll_backends[i]; i++)
		if (dpt__coll_backends[i]->wire == wire)
			return dpt__coll_backends[i];
	return &dpt__coll_cpu;
}
