/*
 * gpu_meta.c: what a trace's header says of the GPUs and the CUDA stack
 * (device properties, CUPTI, runtime and driver versions), read once while
 * CUPTI is held and written from these copies. gpu.c calls gpu_meta_load
 * when it loads libcupti and gpu_meta_probe when it harvests a burst;
 * the writer and gpu_events.c read the copies. libcuda's handful of calls
 * are resolved from the copy the process already has; no CUDA library is
 * linked.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "gpu_meta.h"
#include "state.h"
#include "tw.h"

#define CU_FN(f) static __typeof__(f) *p_##f
CU_FN(cuDeviceGetCount);
CU_FN(cuDeviceGetName);
CU_FN(cuDeviceTotalMem_v2);
CU_FN(cuDeviceGetAttribute);
CU_FN(cuDriverGetVersion);

static uint32_t cupti_version;
static int rt_version = -1, drv_version = -1;
#define DEV_MAX 64
static int n_dev = -1, dev_sms[DEV_MAX];

static void *cuda_sym(const char *name)
{
	static void *libcuda;

	if (libcuda == NULL)
		libcuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
	return libcuda ? dlsym(libcuda, name) : NULL;
}

/*
 * Device properties come from the CUDA driver, and a driver call goes
 * through CUPTI's hooks while CUPTI is attached: made on the agent thread
 * while an application thread finalizes CUPTI, it would race the
 * teardown. So they are read once, at the first harvest, and written from
 * these copies.
 */
enum { P_CC_MAJOR, P_CC_MINOR, P_THREADS_BLOCK, P_THREADS_SM, P_REGS_BLOCK, P_WARP, P_SHMEM_BLOCK,
       P_SMS, P_REGS_SM, P_SHMEM_OPTIN, P_SHMEM_SM, P_N };
static const struct { const char *key; CUdevice_attribute attr; } dev_props[P_N] = {
	[P_CC_MAJOR] = { "computeMajor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR },
	[P_CC_MINOR] = { "computeMinor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR },
	[P_THREADS_BLOCK] = { "maxThreadsPerBlock", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK },
	[P_THREADS_SM] = { "maxThreadsPerMultiprocessor",
	                   CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR },
	[P_REGS_BLOCK] = { "regsPerBlock", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK },
	[P_WARP] = { "warpSize", CU_DEVICE_ATTRIBUTE_WARP_SIZE },
	[P_SHMEM_BLOCK] = { "sharedMemPerBlock", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK },
	[P_SMS] = { "numSms", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT },
	[P_REGS_SM] = { "regsPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR },
	[P_SHMEM_OPTIN] = { "sharedMemPerBlockOptin",
	                    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN },
	[P_SHMEM_SM] = { "sharedMemPerMultiprocessor",
	                 CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR },
};
static struct { char name[256]; size_t mem; int v[P_N]; } *devs;

static void devices_probe(void)
{
	int i, k;

	n_dev = 0;
	if (p_cuDeviceGetCount == NULL || p_cuDeviceGetCount(&n_dev) != CUDA_SUCCESS)
		n_dev = 0;
	if (n_dev > DEV_MAX)
		n_dev = DEV_MAX;
	if (n_dev > 0 && (devs = calloc((size_t)n_dev, sizeof(*devs))) == NULL)
		n_dev = 0;
	for (i = 0; i < n_dev; i++) {
		if (p_cuDeviceGetName)
			p_cuDeviceGetName(devs[i].name, sizeof(devs[i].name), i);
		if (p_cuDeviceTotalMem_v2)
			p_cuDeviceTotalMem_v2(&devs[i].mem, i);
		for (k = 0; k < P_N; k++)
			if (p_cuDeviceGetAttribute)
				p_cuDeviceGetAttribute(&devs[i].v[k], dev_props[k].attr, i);
		dev_sms[i] = devs[i].v[P_SMS];
	}
}

void gpu_write_devices(struct tw *w)
{
	int i, k;

	for (i = 0; i < n_dev; i++) {
		if (i > 0)
			tw_lit(w, ",");
		tw_lit(w, "\n    {\"id\": ");
		tw_int(w, i);
		tw_lit(w, ", \"name\": ");
		tw_str(w, devs[i].name, (size_t)-1);
		tw_lit(w, ", \"totalGlobalMem\": ");
		tw_int(w, (int64_t)devs[i].mem);
		for (k = 0; k < P_N; k++) {
			tw_lit(w, ", \"");
			tw_raw(w, dev_props[k].key, strlen(dev_props[k].key));
			tw_lit(w, "\": ");
			tw_int(w, devs[i].v[k]);
		}
		tw_lit(w, "}");
	}
}

void gpu_write_meta(struct tw *w)
{
	if (cupti_version == 0)
		return; /* CUPTI never loaded */
	tw_lit(w, ",\n  \"cupti_version\": ");
	tw_int(w, cupti_version);
	if (rt_version > 0) {
		tw_lit(w, ",\n  \"cuda_runtime_version\": ");
		tw_int(w, rt_version);
	}
	if (drv_version > 0) {
		tw_lit(w, ",\n  \"cuda_driver_version\": ");
		tw_int(w, drv_version);
	}
}

void gpu_meta_load(uint32_t version)
{
	cupti_version = version;
	p_cuDeviceGetCount = cuda_sym("cuDeviceGetCount");
	p_cuDeviceGetName = cuda_sym("cuDeviceGetName");
	p_cuDeviceTotalMem_v2 = cuda_sym("cuDeviceTotalMem_v2");
	p_cuDeviceGetAttribute = cuda_sym("cuDeviceGetAttribute");
	p_cuDriverGetVersion = cuda_sym("cuDriverGetVersion");
}

void gpu_meta_probe(void)
{
	int (*rt)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");

	if (n_dev < 0)
		devices_probe();
	if (rt_version < 0 && (rt == NULL || rt(&rt_version) != 0))
		rt_version = 0;
	if (drv_version < 0 && (p_cuDriverGetVersion == NULL ||
	                        p_cuDriverGetVersion(&drv_version) != CUDA_SUCCESS))
		drv_version = 0;
}

bool gpu_meta_probed(void)
{
	return n_dev >= 0;
}

int gpu_sm_count(uint32_t dev)
{
	return dev < DEV_MAX && (int)dev < n_dev ? dev_sms[dev] : 0;
}
