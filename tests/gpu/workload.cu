// workload.cu: the CUDA C program of the agent's GPU check, with a known
// set of GPU work per iteration (an NVTX range "iteration"):
//   stream A: memcpy HtoD pageable, kernel scale x2, memset
//   stream B: memcpy HtoD pinned, kernel add_one, memcpy DtoH pinned
//   legacy default stream: memcpy DtoH pageable
// Every copy and set moves N * 4 bytes. usage: workload SECONDS
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define N (1 << 20)

__global__ void scale(float *x, float f)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < N)
		x[i] *= f;
}

__global__ void add_one(float *x)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < N)
		x[i] += 1.0f;
}

static double now(void)
{
	timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 30, end;
	size_t bytes = N * sizeof(float);
	float *page_in = (float *)malloc(bytes), *page_out = (float *)malloc(bytes);
	float *pin_in, *pin_out, *dA, *dB, *dC;
	cudaStream_t sA, sB;
	long it = 0;

	for (int i = 0; i < N; i++)
		page_in[i] = (float)i;
	cudaMallocHost(&pin_in, bytes);
	cudaMallocHost(&pin_out, bytes);
	cudaMalloc(&dA, bytes);
	cudaMalloc(&dB, bytes);
	cudaMalloc(&dC, bytes);
	cudaStreamCreateWithFlags(&sA, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&sB, cudaStreamNonBlocking);
	printf("workload started\n");
	fflush(stdout);
	end = now() + secs;
	while (now() < end) {
		nvtxRangePushA("iteration");
		cudaMemcpyAsync(dA, page_in, bytes, cudaMemcpyHostToDevice, sA);
		scale<<<N / 256, 256, 0, sA>>>(dA, 2.0f);
		scale<<<N / 256, 256, 0, sA>>>(dA, 0.5f);
		cudaMemsetAsync(dC, 0, bytes, sA);
		cudaMemcpyAsync(dB, pin_in, bytes, cudaMemcpyHostToDevice, sB);
		add_one<<<N / 256, 256, 0, sB>>>(dB);
		cudaMemcpyAsync(pin_out, dB, bytes, cudaMemcpyDeviceToHost, sB);
		cudaStreamSynchronize(sA);
		cudaStreamSynchronize(sB);
		cudaMemcpy(page_out, dA, bytes, cudaMemcpyDeviceToHost);
		nvtxRangePop();
		it++;
	}
	printf("workload done after %ld iterations: %s\n", it,
	       cudaGetErrorString(cudaGetLastError()));
	return 0;
}
