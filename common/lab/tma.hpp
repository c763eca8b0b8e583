// The host side of Hopper's tensor memory accelerator: a tensor map, the 128-byte descriptor a
// kernel hands to cp.async.bulk.tensor (lab/tma.cuh's load_tile) to copy a box of a tensor into
// shared memory. The map holds the tensor's address, sizes and strides, the box's size, and how the
// box is laid out in shared memory (here always the 128-byte swizzle wgmma reads); the copy unit
// then computes every address itself, clips the box at the tensor's edges and fills the rest with
// zeros. A kernel takes the map by value as a __grid_constant__ parameter.
//
// The map is encoded by the driver's cuTensorMapEncodeTiled, reached through the runtime's entry
// point lookup, so that nothing links libcuda directly.
#pragma once

#include <cstdint>
#include <initializer_list>

#include <cuda.h>

namespace lab::tma {

// A map of a bf16 tensor of rank dims.size() (at most 5; dims[0] the contiguous one), strides in
// bytes of dims 1.. (16-byte multiples), box sizes per dim (box[0] * 2 bytes at most 128: the
// swizzle's span), read in 128-byte-swizzled boxes. Throws lab::Error naming the argument the
// driver refused.
CUtensorMap bf16_map_swizzle128(const void* base, std::initializer_list<std::uint64_t> dims,
                                std::initializer_list<std::uint64_t> strides_bytes,
                                std::initializer_list<std::uint32_t> box);
// The same for a float tensor (box[0] * 4 bytes at most 128), for reductions into it
// (lab/tma.cuh's reduce_add_tile) as well as copies out of it.
CUtensorMap f32_map_swizzle128(const void* base, std::initializer_list<std::uint64_t> dims,
                               std::initializer_list<std::uint64_t> strides_bytes,
                               std::initializer_list<std::uint32_t> box);

}  // namespace lab::tma
