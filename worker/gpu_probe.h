/*
 * The device files' answer to "may a GPU be usable here?", without CUDA.
 */
#ifndef DPT_WORKER_GPU_PROBE_H
#define DPT_WORKER_GPU_PROBE_H

#include <stdbool.h>

/* False when VISIBLE ($CUDA_VISIBLE_DEVICES; NULL: unset) is empty,
 * starts with -1 or is Slurm's NoDevFiles, or when DEV (the device
 * directory, /dev) has no character device nvidiaN (NVIDIA's driver) nor
 * dxg (WSL's GPU); true otherwise, and when DEV cannot be read. */
bool dpt__gpu_device_files(const char *dev, const char *visible);

#endif
