// The main of every chapter's CPU test binary (chNN_cpu, from tests/cpu/): the host-side pieces of
// a chapter (its tiles and plans, its references, its checks' own arithmetic), which need neither a
// GPU nor a variant. Labelled cpu: CI runs them, and a GPU machine's `ctest -L gpu` leaves them to
// the CPU rather than spending device time on them.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
