/*
 * mhost.h: host metrics from /proc under a root directory (mhost.c).
 */
#ifndef GPROFD_MHOST_H
#define GPROFD_MHOST_H

#include "mset.h"

/* Adds CPU, memory, load, network and disk values found under root
 * ("/" normally; a fixture tree in tests) to s. */
void mhost_sample(const char *root, struct mset *s);

#endif
