// The persistent attention forward's lists (splitplan::persistent_lists, attention/hopper/
// split_plan.hpp; optimized_attention_fused_persistent.cu), on the CPU: every query tile of every
// head once and whole (no split), each block's items in the plan's order, min(items, SMs) blocks
// none of them empty, and the estimate within greedy list scheduling's bound (the mean load plus
// the longest item). Planted: a list that drops an item, or one whose starts skip a block's last,
// fails the first check.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "attention/hopper/split_plan.hpp"

namespace {

struct Case {
  int b, h, seq, d;
  bool causal;
};

// What the lists get wrong (empty: nothing), against the plan's order they were made from.
std::string wrong(const std::vector<flashtma::Item>& order, const splitplan::Lists& l, int sms) {
  const int blocks = std::min(int(order.size()), sms);
  if (int(l.starts.size()) != blocks + 1) return "starts: " + std::to_string(l.starts.size()) + " entries";
  if (l.starts.front() != 0 || l.starts.back() != int(l.items.size())) return "starts do not span the items";
  for (int b = 0; b < blocks; ++b)
    if (l.starts[b + 1] <= l.starts[b]) return "block " + std::to_string(b) + " is empty";
  if (l.items.size() != order.size()) return "items: " + std::to_string(l.items.size()) + " of " + std::to_string(order.size());
  // Each item's place in the plan's order: every one once, and a block's in increasing places.
  std::map<std::tuple<int, int, int, int, int>, int> place;
  for (int i = 0; i < int(order.size()); ++i) {
    const flashtma::Item& it = order[std::size_t(i)];
    place[{it.head, it.tile, it.key_tile0, it.tiles, it.slot}] = i;
  }
  std::vector<bool> seen(order.size());
  for (int b = 0; b < blocks; ++b)
    for (int i = l.starts[b], last = -1; i < l.starts[b + 1]; ++i) {
      const flashtma::Item& it = l.items[std::size_t(i)];
      const auto at = place.find({it.head, it.tile, it.key_tile0, it.tiles, it.slot});
      if (at == place.end()) return "block " + std::to_string(b) + " runs an item the plan does not have";
      if (seen[std::size_t(at->second)]) return "an item runs twice";
      if (at->second < last) return "block " + std::to_string(b) + "'s items out of the plan's order";
      seen[std::size_t(at->second)] = true, last = at->second;
    }
  return "";
}

TEST(PersistentLists, EveryQueryTileOnceWholeInPlanOrderWithinGreedysBound) {
  const int sms = 132;
  const std::size_t l2 = std::size_t(60) << 20;
  for (const Case& c : {Case{4, 12, 1024, 64, true}, Case{4, 12, 1024, 64, false}, Case{8, 1, 4096, 64, true},
                        Case{8, 16, 4096, 128, true}, Case{1, 1, 300, 64, true}, Case{1, 2, 129, 128, true},
                        Case{2, 1, 77, 64, false}, Case{4, 16, 1024, 128, true}}) {
    const attn::Dims a(lab::Shape{c.b, c.h, c.seq, c.d, c.causal ? 1 : 0});
    SCOPED_TRACE(std::to_string(c.b) + "x" + std::to_string(c.h) + "x" + std::to_string(c.seq) + "x" +
                 std::to_string(c.d) + "x" + std::to_string(c.causal));
    const int br = c.d == 64 ? flashtma::Config<64>::kBr : flashtma::Config<128>::kBr, bc = flashtma::Config<64>::kBc;
    const int longest = splitplan::longest_tiles(a, br, bc);
    const splitplan::Plan order = splitplan::plan_for(a, br, bc, sms, l2, longest);
    // The plan without a split: every query tile of every head once, all its keys.
    ASSERT_EQ(order.items.size(), std::size_t(a.bh()) * std::size_t((c.seq + br - 1) / br));
    for (const flashtma::Item& it : order.items) {
      ASSERT_EQ(it.slot, -1);
      ASSERT_EQ(it.key_tile0, 0);
      ASSERT_EQ(it.tiles, splitplan::key_tiles(a, br, bc, it.tile));
    }
    const splitplan::Lists lists = splitplan::persistent_lists(order.items, sms);
    EXPECT_EQ(wrong(order.items, lists, sms), "");
    // persistent_plan (step 10's and the package's) is this composition, item for item.
    const splitplan::Lists planned = splitplan::persistent_plan(a, sms, l2);
    ASSERT_EQ(planned.starts, lists.starts);
    ASSERT_EQ(planned.items.size(), lists.items.size());
    for (std::size_t i = 0; i < lists.items.size(); ++i)
      ASSERT_TRUE(planned.items[i].head == lists.items[i].head && planned.items[i].tile == lists.items[i].tile &&
                  planned.items[i].tiles == lists.items[i].tiles) << i;
    // Greedy list scheduling ends by the mean load plus the longest item (Graham's bound).
    const int blocks = std::min(int(order.items.size()), sms);
    double total = 0;
    for (const flashtma::Item& it : order.items) total += it.tiles + splitplan::kItemCost;
    EXPECT_GE(lists.estimate, splitplan::kBlockCost + total / blocks - 1e-9);
    EXPECT_LE(lists.estimate, splitplan::kBlockCost + total / blocks + longest + splitplan::kItemCost + 1e-9);

    // Planted: an item dropped, and a block's last item left out of its range, are each found.
    splitplan::Lists dropped = lists;
    dropped.items.pop_back();
    dropped.starts.back() -= 1;
    EXPECT_NE(wrong(order.items, dropped, sms), "");
    if (blocks > 1 && lists.starts[1] - lists.starts[0] > 1) {
      splitplan::Lists shifted = lists;
      shifted.starts[1] -= 1;  // block 0's last item moves to block 1, ahead of block 1's own (earlier) ones
      EXPECT_NE(wrong(order.items, shifted, sms), "");
    }
  }
}

}  // namespace
