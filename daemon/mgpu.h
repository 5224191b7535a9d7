/*
 * mgpu.h: GPU metrics through NVML, loaded at run time (mgpu.c).
 *
 * Floor: a leaf under metrics.c, its only caller (the sampler thread).
 */
#ifndef GPROFD_MGPU_H
#define GPROFD_MGPU_H

#include <stddef.h>

#include "mset.h"

struct mgpu;

/* Loads and initialises NVML from library ("libnvidia-ml.so.1", or a
 * stand-in in tests). NULL with why set when there is no usable NVML. */
struct mgpu *mgpu_open(const char *library, char *why, size_t n);
void mgpu_close(struct mgpu *m);
/* Adds every GPU's values (and gprofd_nvml_up) to s; m may be NULL (then
 * only gprofd_nvml_up 0). 0, or -1 when NVML failed this time. */
int mgpu_sample(struct mgpu *m, struct mset *s);

#endif
