/* The libFuzzer entry point every fuzz-*.c defines; driver.c calls it when
 * libFuzzer is absent. */
#ifndef GPROF_FUZZ_H
#define GPROF_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property violation is a bug: crash so the fuzzer saves the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

#endif
