// stress.cu: the CUDA C loop of the agent's GPU stress test (test-stress.py
// --program), at about 15,000 iterations a second on an H100: each
// iteration is an NVTX range "it" holding 3 kernels on one stream, 2 on
// another, a 1 MiB pinned host-to-device and device-to-host copy, a memset,
// then cudaDeviceSynchronize; then gprof_step() (linked with
// libgprof_agent, which CUDA_INJECTION64_PATH also names: one instance).
//
// Runs until stdin closes (checked every 256 iterations from a thread),
// prints "ready" first and, at the end,
//   "done ITERATIONS max_stall_us US checksum C"
// where max_stall_us is the longest time between two iteration starts and
// C a sum of results read back (checked against the closed form, so a
// capture that corrupted work would show). Exit 1 on any CUDA error.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <execinfo.h>
#include <sys/prctl.h>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "gprof_agent.h"

#define N (1 << 18) // 1 MiB of floats

__global__ void inc(float *x, float v)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < N)
		x[i] += v;
}

// A crash is what this test exists to find: say where (the thread's name:
// "gprof-agent" is the agent's own; the frames: addr2line on the libraries).
static void on_fault(int sig, siginfo_t *si, void *)
{
	char name[32] = "?", line[160];
	void *frames[64];
	int n = backtrace(frames, 64);

	prctl(PR_GET_NAME, name, 0, 0, 0);
	snprintf(line, sizeof(line), "stress: signal %d at %p in thread %ld (%s); backtrace:\n",
	         sig, si->si_addr, (long)gettid(), name);
	if (write(2, line, strlen(line)) < 0)
		_exit(3);
	backtrace_symbols_fd(frames, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static double now_us(void)
{
	timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
	fprintf(stderr, "stress: %s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

int main()
{
	static std::atomic<bool> stop(false);
	size_t bytes = N * sizeof(float);
	float *h_in, *h_out, *dA, *dB;
	cudaStream_t sA, sB;
	double prev = 0, stall = 0, sum = 0;
	long it = 0;

	struct sigaction sa = {};
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, nullptr);
	sigaction(SIGBUS, &sa, nullptr);
	sigaction(SIGABRT, &sa, nullptr);
	CK(cudaMallocHost(&h_in, bytes));
	CK(cudaMallocHost(&h_out, bytes));
	CK(cudaMalloc(&dA, bytes));
	CK(cudaMalloc(&dB, bytes));
	CK(cudaStreamCreateWithFlags(&sA, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&sB, cudaStreamNonBlocking));
	for (int i = 0; i < N; i++)
		h_in[i] = 1.0f;
	std::thread([] { char c; while (read(0, &c, 1) > 0) ; stop = true; }).detach();
	for (int w = 0; w < 100; w++) { // module loading and first launches: not a stall
		inc<<<N / 256, 256, 0, sA>>>(dA, 0.0f);
		CK(cudaDeviceSynchronize());
	}
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		double t = now_us();
		if (prev > 0 && t - prev > stall)
			stall = t - prev;
		prev = t;
		nvtxRangePushA("it");
		CK(cudaMemcpyAsync(dA, h_in, bytes, cudaMemcpyHostToDevice, sA));
		inc<<<N / 256, 256, 0, sA>>>(dA, 1.0f);
		inc<<<N / 256, 256, 0, sA>>>(dA, 2.0f);
		inc<<<N / 256, 256, 0, sA>>>(dA, 3.0f);
		CK(cudaMemsetAsync(dB, 0, bytes, sB));
		inc<<<N / 256, 256, 0, sB>>>(dB, 4.0f);
		inc<<<N / 256, 256, 0, sB>>>(dB, 5.0f);
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpyAsync(h_out, dA, bytes, cudaMemcpyDeviceToHost, sA));
		CK(cudaDeviceSynchronize());
		nvtxRangePop();
		gprof_step();
		sum += h_out[it % N]; // 1 + 1 + 2 + 3 = 7 every time
		it++;
	}
	CK(cudaGetLastError());
	printf("done %ld max_stall_us %.0f checksum %s\n", it, stall,
	       sum == 7.0 * it ? "ok" : "WRONG");
	return sum == 7.0 * it ? 0 : 1;
}
