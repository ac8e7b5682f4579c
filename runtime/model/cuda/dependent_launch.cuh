// Programmatic dependent launch (compute capability 9.0 and newer) for the decode step's chain
// of short kernels: norm, q|k|v projection, RoPE, attention, its merge, o_proj, norm, gate|up,
// SwiGLU + down, 28 times over for Qwen2-1.5B. Each kernel reads what the one before wrote, and
// every boundary between two of them used to leave the GPU waiting for the next grid to be
// launched and to ramp up.
//
// A kernel launched with launch_dependent() may start before the kernel before it has finished:
//   - let_next_kernel_start() (called early by every kernel here) allows the NEXT kernel's
//     blocks to be scheduled once every block of this one has called it or exited;
//   - wait_for_previous_kernel() returns once the previous kernel has completed and its writes
//     are visible. Before it a kernel may only read what no kernel of the step writes (weights,
//     norm weights); every read or write of activations, the kv cache or the partials comes
//     after it. Completion is transitive: the previous kernel itself waited for its own
//     predecessor before it could complete.
// A kernel the chain does not know (libtorch's, cuBLAS's) ends the overlap: it starts after the
// one before it as usual, and the next one of ours waits for its completion.
//
// Below compute capability 9.0 the two calls compile to nothing and launch_dependent() launches
// as <<<>>> does; KBRL_DECODE_PDL=off does the same on any device (to compare, as
// bench/sampler_throughput does).
//
// The device side is apart from the launcher (dependent_launch_host.cuh) so that the CPU
// emulation of the kernels (test/cuda_emulation) includes it as it is.

#pragma once

namespace kbrl::model::cuda {

/// Lets the next kernel of the stream be scheduled (see above); no effect below sm_90.
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the previous kernel of the stream has completed and its writes are visible; no
/// effect below sm_90 (the kernels then run one after the other anyway).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

} // namespace kbrl::model::cuda
