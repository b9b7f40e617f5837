// cupti_app.cu: a small CUDA program for tests/gpu/run_cupti.sh: STEPS steps,
// each an NVTX range "step N" around cudaMalloc, a host-to-device copy,
// KERNELS kernel launches, a device-to-host copy and cudaFree. It prints one
// checksum line, the same with and without the injection library.
// Usage: cupti_app [STEPS [KERNELS [MIB]]]   (defaults 50 20 16)
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void axpb(float *x, size_t n, float a, float b)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		x[i] = a * x[i] + b;
}

#define CHECK(call)                                                                        \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess) {                                                   \
			std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));  \
			return 1;                                                          \
		}                                                                          \
	} while (0)

int main(int argc, char **argv)
{
	int steps = argc > 1 ? std::atoi(argv[1]) : 50;
	int kernels = argc > 2 ? std::atoi(argv[2]) : 20;
	size_t n = (argc > 3 ? std::atoi(argv[3]) : 16) * (size_t)(1 << 20) / sizeof(float);
	std::vector<float> host(n, 1.0f);
	double sum = 0;

	for (int s = 0; s < steps; s++) {
		char name[32];
		std::snprintf(name, sizeof(name), "step %d", s);
		nvtxRangePushA(name);
		float *dev;
		CHECK(cudaMalloc(&dev, n * sizeof(float)));
		CHECK(cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
		for (int k = 0; k < kernels; k++)
			axpb<<<264, 256>>>(dev, n, 0.5f, 1.0f);
		CHECK(cudaGetLastError());
		CHECK(cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
		CHECK(cudaFree(dev));
		nvtxRangePop();
		sum += host[s % n];
	}
	std::printf("checksum %.6f\n", sum);
	return 0;
}
