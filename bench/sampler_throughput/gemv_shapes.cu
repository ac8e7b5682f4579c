// The one-token GEMV of a decode step (runtime/model/cuda/decode_linear_kernel.cuh), alone, at
// the projections' shapes of Qwen2-1.5B and Qwen2.5-7B: each variant of the kernel (weight rows
// per block, threads per block) against cuBLAS (the peer: cublasGemmEx with one column, what
// decode_linear falls back to) and against the device's copy bandwidth. decode_linear.cu's
// rows_per_block picks its row counts from this table.
//
// Each measurement replays a CUDA graph of one launch per weight copy, the copies together far
// larger than the L2 cache (as the layers of a decode step are), so every launch reads its
// weights from memory; the time per launch includes the graph's kernel-to-kernel handover, as a
// decode step's does (without programmatic dependent launch). Results are checked against the
// float32 sums of a reference kernel, so a variant that is fast because it is wrong shows.
//
// Build and run on the GPU machine (no kbrl build needed):
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. bench/sampler_throughput/gemv_shapes.cu -lcublas \
//     -o /tmp/gemv_shapes && /tmp/gemv_shapes [--pool-mb 2048] [--reps 20]

#include "runtime/model/cuda/decode_linear_kernel.cuh"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace k = kbrl::model::cuda;
using bf16 = __nv_bfloat16;

#define CHECK(call)                                                                            \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                   cudaGetErrorString(e_));                                                    \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

struct gemv_shape {
  const char* model;
  const char* name;
  int64_t out_features, in_features;
  bool swiglu; // x is [gate | up] of 2 in_features
};

const gemv_shape shapes[] = {
  {"Qwen2-1.5B", "q|k|v", 2048, 1536, false},  {"Qwen2-1.5B", "o_proj", 1536, 1536, false},
  {"Qwen2-1.5B", "gate|up", 17920, 1536, false}, {"Qwen2-1.5B", "down", 1536, 8960, true},
  {"Qwen2.5-7B", "q|k|v", 4608, 3584, false},  {"Qwen2.5-7B", "o_proj", 3584, 3584, false},
  {"Qwen2.5-7B", "gate|up", 37888, 3584, false}, {"Qwen2.5-7B", "down", 3584, 18944, true},
};

__global__ void fill_random(bf16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65535.0f - 0.5f) * 0.1f);
  }
}

/// The float32 sums the variants must match: one thread per row, the SwiGLU input rounded as the
/// kernel rounds it.
__global__ void reference_gemv(const bf16* x, const bf16* w, float* out, int64_t out_features,
                               int64_t in_features, bool swiglu) {
  const int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (n >= out_features)
    return;
  float sum = 0.0f;
  for (int64_t i = 0; i < in_features; ++i) {
    const float v = swiglu ? k::to_float(k::swiglu_value<bf16>(x[i], x[in_features + i]))
                           : __bfloat162float(x[i]);
    sum += v * __bfloat162float(w[n * in_features + i]);
  }
  out[n] = sum;
}

struct buffers {
  bf16* pool = nullptr;
  int64_t pool_elements = 0;
  bf16* x = nullptr;  // the input row (2 x 18,944 elements: the widest [gate | up])
  bf16* y = nullptr;  // one output row
  float* expected = nullptr;
};

/// The copies of a shape's weight that fit the pool, each 256-byte aligned.
std::vector<const bf16*> weight_copies(const buffers& b, const gemv_shape& s) {
  const int64_t each = (s.out_features * s.in_features + 127) / 128 * 128;
  std::vector<const bf16*> copies;
  for (int64_t at = 0; at + each <= b.pool_elements; at += each)
    copies.push_back(b.pool + at);
  return copies;
}

/// Microseconds per launch: a graph of launch(copy) for every copy, replayed `reps` times after
/// two warm-up replays.
double time_per_launch(const std::vector<const bf16*>& copies, int reps, cudaStream_t stream,
                       const std::function<void(const bf16*)>& launch) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (const bf16* w : copies)
    launch(w);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i)
    CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i)
    CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return 1000.0 * ms / (static_cast<double>(reps) * copies.size());
}

/// The largest relative error of y against `expected` over the row, relative to the row's
/// largest magnitude (a bf16 rounding is 2^-8 of it at most).
double worst_error(const buffers& b, int64_t n) {
  std::vector<bf16> got(n);
  std::vector<float> want(n);
  CHECK(cudaMemcpy(got.data(), b.y, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(want.data(), b.expected, n * sizeof(float), cudaMemcpyDeviceToHost));
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < n; ++i)
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  for (int64_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(__bfloat162float(got[i]) - static_cast<double>(want[i])));
  return scale > 0 ? worst / scale : worst;
}

struct variant {
  int rows, threads; // threads 0: as decode_linear.cu picks them
  std::string label() const {
    return "rows " + std::to_string(rows) + " threads "
           + (threads ? std::to_string(threads) : std::string("auto"));
  }
};

template <int Rows>
void launch_variant(const gemv_shape& s, const bf16* x, const bf16* w, bf16* y, int threads,
                    cudaStream_t stream) {
  const int auto_threads = k::warp_multiple(s.in_features / 8, k::decode_linear_max_threads);
  const int t = threads ? threads : auto_threads;
  const auto blocks = static_cast<unsigned>((s.out_features + Rows - 1) / Rows);
  using kind = k::decode_linear_input;
  const auto kernel =
    t > k::decode_linear_max_threads
      ? (s.swiglu ? k::decode_linear_kernel<bf16, kind::swiglu, Rows, 512>
                  : k::decode_linear_kernel<bf16, kind::plain, Rows, 512>)
      : (s.swiglu ? k::decode_linear_kernel<bf16, kind::swiglu, Rows>
                  : k::decode_linear_kernel<bf16, kind::plain, Rows>);
  kernel<<<blocks, t, 0, stream>>>(x, w, nullptr, y, s.out_features, s.in_features, {}, false);
}

using launcher = void (*)(const gemv_shape&, const bf16*, const bf16*, bf16*, int, cudaStream_t);

launcher launcher_for(int rows) {
  switch (rows) {
  case 1: return launch_variant<1>;
  case 2: return launch_variant<2>;
  case 4: return launch_variant<4>;
  case 8: return launch_variant<8>;
  case 16: return launch_variant<16>;
  default: return nullptr;
  }
}

// The first is the kernel with 4 rows a block: the "x 4 rows" column compares with it.
const variant variants[] = {
  {4, 0}, {8, 0}, {16, 0}, {2, 0}, {1, 0}, {4, 128}, {8, 128}, {2, 128}, {16, 128},
  {4, 512}, {8, 512}, {16, 512},
};

double copy_bandwidth(const buffers& b, cudaStream_t stream) {
  const int64_t half = b.pool_elements / 2 * sizeof(bf16);
  auto* bytes = reinterpret_cast<char*>(b.pool);
  CHECK(cudaMemcpyAsync(bytes + half, bytes, half, cudaMemcpyDeviceToDevice, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < 10; ++i)
    CHECK(cudaMemcpyAsync(bytes + half, bytes, half, cudaMemcpyDeviceToDevice, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  return 2.0 * half * 10 / (ms / 1000.0); // read + write, as kbrl-bench-generate counts it
}

} // namespace

int main(int argc, char** argv) {
  int64_t pool_mb = 2048;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pool-mb"))
      pool_mb = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: gemv_shapes [--pool-mb MB] [--reps N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  buffers b;
  b.pool_elements = pool_mb * (1 << 20) / sizeof(bf16);
  CHECK(cudaMalloc(&b.pool, b.pool_elements * sizeof(bf16)));
  CHECK(cudaMalloc(&b.x, 2 * 18944 * sizeof(bf16)));
  CHECK(cudaMalloc(&b.y, 37888 * sizeof(bf16)));
  CHECK(cudaMalloc(&b.expected, 37888 * sizeof(float)));
  fill_random<<<4096, 256>>>(b.pool, b.pool_elements, 1);
  fill_random<<<64, 256>>>(b.x, 2 * 18944, 2);
  CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t cublas;
  if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  cublasSetStream(cublas, stream);
  const double bandwidth = copy_bandwidth(b, stream);
  std::printf("%s, %d SMs, L2 %d MB; copy bandwidth %.0f GB/s; weight pool %lld MB\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, bandwidth / 1e9,
              static_cast<long long>(pool_mb));
  for (const auto& s : shapes) {
    const auto copies = weight_copies(b, s);
    const double bytes = static_cast<double>(s.out_features) * s.in_features * sizeof(bf16);
    std::printf("\n%s %s: [%lld x %lld]%s, %.1f MB, %zu copies\n", s.model, s.name,
                static_cast<long long>(s.out_features), static_cast<long long>(s.in_features),
                s.swiglu ? " after the SwiGLU" : "", bytes / 1e6, copies.size());
    reference_gemv<<<(s.out_features + 127) / 128, 128, 0, stream>>>(
      b.x, copies.back(), b.expected, s.out_features, s.in_features, s.swiglu);
    // the peer: cuBLAS, one column (the SwiGLU not included: its input is x's first half)
    const float one = 1.0f, zero = 0.0f;
    const double peer_us = time_per_launch(copies, reps, stream, [&](const bf16* w) {
      cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.out_features), 1,
                   static_cast<int>(s.in_features), &one, w, CUDA_R_16BF,
                   static_cast<int>(s.in_features), b.x, CUDA_R_16BF,
                   static_cast<int>(s.in_features), &zero, b.y, CUDA_R_16BF,
                   static_cast<int>(s.out_features), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    std::printf("  %-24s %8.2f us  %6.0f GB/s  %5.1f%% of copy\n", "cuBLAS (peer)", peer_us,
                bytes / peer_us / 1e3, 100.0 * bytes / peer_us / 1e3 / (bandwidth / 1e9));
    double base_us = 0;
    for (const auto& v : variants) {
      const int threads = v.threads ? v.threads : 0;
      if (threads > s.in_features / 8)
        continue; // more threads than the row has 16-byte chunks
      const launcher launch = launcher_for(v.rows);
      const double us = time_per_launch(copies, reps, stream, [&](const bf16* w) {
        launch(s, b.x, w, b.y, threads, stream);
      });
      CHECK(cudaGetLastError());
      launch(s, b.x, copies.back(), b.y, threads, stream);
      CHECK(cudaStreamSynchronize(stream));
      const double error = worst_error(b, s.out_features);
      if (base_us == 0)
        base_us = us;
      std::printf("  %-24s %8.2f us  %6.0f GB/s  %5.1f%% of copy  %.2fx cuBLAS  %.2fx 4 rows"
                  "  error %.1e%s\n",
                  v.label().c_str(), us, bytes / us / 1e3,
                  100.0 * bytes / us / 1e3 / (bandwidth / 1e9), peer_us / us, base_us / us,
                  error, error > 1.0 / 128 ? "  WRONG" : "");
    }
  }
  return 0;
}
