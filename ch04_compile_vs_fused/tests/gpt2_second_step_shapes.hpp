// The full steps that the second-step test (gpt2_second_step_test.cpp) runs twice: from the check
// set (Gpt2Step::checks), shapes whose saved tensors do not all fit in the gradients' buffer
// (gpt2::plan_saved spills some stage), so that a step that keeps its weights' copies where they
// outlive the step (optimized_gpt2_step_fused_bf16_adamw_rounds) has some to keep: two blocks of
// head size 16 at a context off every tile, and one block of head size 64 (the Hopper kernels'
// width) at two batches. tests/cpu/saved_test.cu holds them to spilling.
#pragma once

#include "lab/registry.hpp"

namespace gpt2_tests {

inline const lab::Shape kSecondStepShapes[] = {{2, 32, 2, 77, 1, 31, 3}, {1, 128, 2, 65, 2, 97, 3}};

}  // namespace gpt2_tests
