// Which kernel width flash::dispatch (attention/kernels/flash_tiles.cuh) hands a head size to, on the
// CPU: each width the kernels are written for runs as itself, causal and not; 256 only where the
// caller's kernels take it (flash_bf16.cuh's, dispatch<256>); any other head size is an error naming
// it. Before session 73 another head size ran the width-128 kernels, reading and writing rows of 128
// in tensors of another width: a caller that had not validated d got wrong memory traffic, not an
// error.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention/kernels/flash_tiles.cuh"

namespace {

// The (width, causal) pairs dispatch<MaxD> calls f with for head size d.
template <int MaxD = 128>
std::vector<std::pair<int, bool>> dispatched(int d) {
  std::vector<std::pair<int, bool>> calls;
  for (bool causal : {false, true})
    flash::dispatch<MaxD>(d, causal, [&](auto dc, auto c) { calls.emplace_back(decltype(dc)::value, decltype(c)::value); });
  return calls;
}

TEST(AttentionDispatch, EachWidthRunsAsItself) {
  for (int d : {16, 32, 64, 128}) {
    const std::vector<std::pair<int, bool>> want = {{d, false}, {d, true}};
    EXPECT_EQ(dispatched(d), want) << "d = " << d;
    EXPECT_EQ(dispatched<256>(d), want) << "d = " << d << ", MaxD 256";
  }
  EXPECT_EQ(dispatched<256>(256), (std::vector<std::pair<int, bool>>{{256, false}, {256, true}}));
}

TEST(AttentionDispatch, AnotherHeadSizeIsAnErrorNamingIt) {
  auto expect_refused = [](auto call, int d, const std::string& widths) {
    try {
      call();
      ADD_FAILURE() << "d = " << d << " was dispatched";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "flash: no kernel for head size " + std::to_string(d) + " (" + widths + ")");
    }
  };
  for (int d : {0, 1, 8, 80, 96, 127, 129, 256, 512}) {
    expect_refused([&] { dispatched(d); }, d, "16, 32, 64, 128");
    if (d != 256) expect_refused([&] { dispatched<256>(d); }, d, "16, 32, 64, 128, 256");
  }
}

}  // namespace
