// Hopper's asynchronous copies and the barriers that track them, as the lab's kernels use them: a
// producer thread asks the tensor memory accelerator (TMA) to copy a contiguous range of global
// memory into shared memory (cp.async.bulk), and the copy itself reports its bytes to an mbarrier
// in shared memory; consumers wait on that barrier's phase and, when done with the buffer, arrive
// on a second barrier that lets the producer refill it. No thread spends registers or issue slots
// on the bytes in flight: the pipeline's depth is shared memory, not warps.
//
// The phase protocol: an mbarrier completes a phase when its expected arrivals (the count given to
// init) and expected transaction bytes are all in; wait(bar, parity) returns once the phase with
// that parity has completed. A fresh barrier counts as having completed the phase before its first
// (parity 1), so a producer's first wait on an empty-buffer barrier with parity 1 passes at once.
// Every function here needs sm_90; callers keep them behind a check of the device (a variant's
// supports()) and compile them only for __CUDA_ARCH__ >= 900.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace lab::tma {

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initializes each barrier, then the block synchronizes (and, with clusters, fences).
__device__ __forceinline__ void init(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}
// Makes the initialized barriers visible to the async proxy (the TMA unit) before any copy uses them.
__device__ __forceinline__ void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// Arrives once and announces `bytes` more transaction bytes for the current phase (the copies issued
// next will bring them).
__device__ __forceinline__ void arrive_expect_bytes(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}
// Whether the phase of this parity has completed (try_wait suspends the thread for a while first).
__device__ __forceinline__ bool try_wait(std::uint64_t* bar, unsigned parity) {
  std::uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits until the phase of this parity completed. The loop is C++, not a branch inside the asm, so
// the compiler sees it and reconverges the warp after it.
__device__ __forceinline__ void wait(std::uint64_t* bar, unsigned parity) {
  while (!try_wait(bar, parity)) {
  }
}

// The same wait with acquire at cluster scope: for a barrier whose bytes another block of the
// cluster sent (store_pair_to_peer), so that this thread's reads after the wait see them.
__device__ __forceinline__ void wait_cluster(std::uint64_t* bar, unsigned parity) {
  std::uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
}

// Distributed shared memory (a cluster's blocks reading and writing each other's shared memory).
// Stores a and b into block `rank` of this cluster, at the address `local` has in this block's
// shared memory, and completes 8 transaction bytes on that block's barrier at the address `bar`
// has here: the data and its signal in one instruction (st.async), no fence, no second barrier.
// The receiver arrives on its own barrier with arrive_expect_bytes(bar, 8) and waits with
// wait_cluster. Both blocks must have initialized their barriers (fence_init, then a cluster-wide
// barrier) before the first store.
__device__ __forceinline__ void store_pair_to_peer(float* local, float a, float b, std::uint64_t* bar, unsigned rank) {
  std::uint32_t dst, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(smem_address(local)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(smem_address(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(dst),
               "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(remote_bar)
               : "memory");
}

// Orders this thread's earlier shared-memory accesses (the generic proxy's) before later accesses
// of the async proxy (the TMA's copies): a consumer that read a buffer fences before it frees it,
// so the copy that refills the buffer cannot overtake the reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory;
// the bytes count against `bar`'s current phase as they land.
__device__ __forceinline__ void load_bulk(void* smem_dst, const void* global_src, unsigned bytes, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_address(smem_dst)),
      "l"(global_src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}

// Copies the box of a tensor map (lab/tma.hpp) whose first element is at coordinates (c0, c1, c2),
// innermost first, into shared memory at smem_dst (1024-byte aligned for the 128-byte swizzle),
// laid out as the map says; elements outside the tensor arrive as zeros and still count. `map` is
// the kernel's __grid_constant__ parameter (its address, not a copy).
__device__ __forceinline__ void load_tile(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2,
                                          std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(smem_address(smem_dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_address(bar))
      : "memory");
}

// Adds `bytes` of floats (a multiple of 16; both addresses 16-byte aligned) from shared memory into
// global memory, element by element, in the TMA unit and L2: one instruction instead of a thread's
// atomic per element. Completion is tracked per thread in bulk groups: commit after issuing;
// wait_read before overwriting the source, wait before the results are needed (or the block ends).
// The source was written by ordinary stores: fence_proxy_async in each writer, then a barrier,
// before the copy is issued.
__device__ __forceinline__ void reduce_add_bulk(float* global_dst, const void* smem_src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(global_dst),
               "r"(smem_address(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// At most N of this thread's bulk groups still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// At most N of this thread's bulk groups are still incomplete.
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// Adds the box of a float tensor map whose first element is at (c0, c1, c2) from shared memory
// (laid out as the map says; 1024-byte aligned for the 128-byte swizzle) into the tensor, in the
// TMA unit and L2; elements outside the tensor are dropped. Tracked in bulk groups as
// reduce_add_bulk.
__device__ __forceinline__ void reduce_add_tile(const CUtensorMap* map, const void* smem_src, int c0, int c1, int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
          reinterpret_cast<std::uint64_t>(map)),
      "r"(smem_address(smem_src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Stores the box of a tensor map whose first element is at (c0, c1, c2) from shared memory (laid out
// as the map says; 1024-byte aligned for the 128-byte swizzle) into the tensor; elements outside
// the tensor are dropped. Tracked in bulk groups as reduce_add_bulk (the source written by ordinary
// stores: fence_proxy_async in each writer, then a barrier, before the copy is issued).
__device__ __forceinline__ void store_tile(const CUtensorMap* map, const void* smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(smem_address(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

// Fetches a tensor map into the descriptor cache ahead of its first use.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

}  // namespace lab::tma
