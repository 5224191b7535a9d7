/*
 * mgpu.h: GPU metrics through NVML, loaded at run time (mgpu.c).
 *
 * Floor: a leaf under metrics.c, its only caller (the sampler thread).
 */
#ifndef GPROFD_MGPU_H
#define GPROFD_MGPU_H

#include <stdbool.h>
#include <stddef.h>

#include "mset.h"

struct mgpu;

/* Loads and initialises NVML from library ("libnvidia-ml.so.1", or a
 * stand-in in tests). NULL with why set when there is no usable NVML. */
struct mgpu *mgpu_open(const char *library, char *why, size_t n);
/* The same, also saying whether NVML is absent (*absent: the library is not
 * installed, so no NVIDIA driver: a host without GPUs, not a fault) rather
 * than broken (it loads but lacks its entry points or fails to initialise). */
struct mgpu *mgpu_load(const char *library, bool *absent, char *why, size_t n);
/* The GPUs the last sample saw (0 for NULL). */
int mgpu_count(const struct mgpu *m);
void mgpu_close(struct mgpu *m);
/* Adds every GPU's values (and gprofd_nvml_up) to s; m may be NULL (then
 * only gprofd_nvml_up 0). 0, or -1 when NVML failed this time. */
int mgpu_sample(struct mgpu *m, struct mset *s);

#endif
