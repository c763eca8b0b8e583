// The Hopper attention backward's block order (flashtma::bwd::Order, attention/hopper/
// backward_wgmma.cuh), on the CPU: every (head, key tile) once, the grid's blocks in the order it
// claims (a group of heads at a time, each group's tile 0 of every head before any tile 1), and the
// group as order_for sizes it.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "attention/hopper/backward_wgmma.cuh"

namespace {

using flashtma::bwd::Order;

// The places of blocks 0 .. bh tiles - 1, checked: a permutation of the heads x tiles, and within
// each group of `group` heads (the last may be short) the tiles in order, each over the group's heads.
void expect_order(const Order& o) {
  SCOPED_TRACE("bh " + std::to_string(o.bh) + ", tiles " + std::to_string(o.tiles) + ", group " +
               std::to_string(o.group));
  std::set<std::pair<int, int>> seen;
  int b = 0;
  for (int first = 0; first < o.bh; first += o.group) {
    const int heads = std::min(o.group, o.bh - first);
    for (int tile = 0; tile < o.tiles; ++tile)
      for (int h = 0; h < heads; ++h, ++b) {
        const Order::Place at = o.place(b);
        ASSERT_EQ(at.head, first + h) << "block " << b;
        ASSERT_EQ(at.tile, tile) << "block " << b;
        seen.insert({at.head, at.tile});
      }
  }
  EXPECT_EQ(b, o.bh * o.tiles);
  EXPECT_EQ(seen.size(), std::size_t(o.bh) * o.tiles);
}

TEST(AttentionBackwardOrder, EveryBlockOnceLongestFirstInEachGroup) {
  for (const Order& o : {Order{48, 8, 48}, Order{48, 8, 1}, Order{128, 32, 8}, Order{13, 5, 4}, Order{7, 3, 7},
                         Order{1, 1, 1}, Order{5, 9, 2}})
    expect_order(o);
}

TEST(AttentionBackwardOrder, HeadAfterHeadWhenOneAtATime) {
  const Order o{6, 4, 1};  // the grid's former order: x the key tile, y the head
  for (int b = 0; b < o.bh * o.tiles; ++b) {
    EXPECT_EQ(o.place(b).head, b / o.tiles);
    EXPECT_EQ(o.place(b).tile, b % o.tiles);
  }
}

TEST(AttentionBackwardOrder, GroupKeepsQAndDOWithinTheBudget) {
  using flashtma::bwd::kOrderBytes;
  using flashtma::bwd::order_for;
  // GPT-2 small: 48 heads of 1024 x 64, Q and dO 256 KiB a head: all at once.
  EXPECT_EQ(order_for(48, 8, 1024, 64, true).group, 48);
  // 8 x 16 heads of 4096 x 128: 2 MiB a head, 8 in 16 MiB; of 4096 x 64, 16.
  EXPECT_EQ(order_for(128, 32, 4096, 128, true).group, int(kOrderBytes / (4096 * 128 * 4)));
  EXPECT_EQ(order_for(128, 32, 4096, 128, true).group, 8);
  EXPECT_EQ(order_for(128, 32, 4096, 64, true).group, 16);
  // Past the budget, one; not causal (equal tiles), one.
  EXPECT_EQ(order_for(4, 64, 65536, 128, true).group, 1);
  EXPECT_EQ(order_for(48, 8, 1024, 64, false).group, 1);
  EXPECT_EQ(order_for(48, 8, 1024, 64, true).tiles, 8);
}

}  // namespace
