// The block plan of the split attention forward (forward/09_optimized_attention_fused_split.cu):
// which blocks run, in which order, and where long rows' keys are split, chosen by simulating the
// GPU's block scheduler. Host code: the plan is made once a shape, untimed, in the variant's state.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "attention/attention.cuh"
#include "attention/hopper/flash_tma.cuh"

namespace splitplan {

// The plan for a shape: the blocks (items) in launch order, and the split query tiles to combine.
struct Combine {
  int head, tile, chunks, slot0;  // chunk c of the tile is in slot slot0 + c
};
struct Plan {
  std::vector<flashtma::Item> items;
  std::vector<Combine> combines;
  int slots = 0;
  double estimate = 0;  // the simulated time, in tiles
};

// The model's costs, in tiles of keys, measured on the H100 at d = 64 (a tile of 192 queries x 128
// keys takes 1.36 us in a running block): a block's start-up and end (the barriers, Q's copy, the
// ring filling, the first and last products unoverlapped, the output's store) about 7 us, 5 tiles
// (from one round of 8-tile blocks, 18.3 us, and two rounds of 32-tile blocks, 102 us); the
// combine launch about 5 us, 4 tiles. At d = 128 a tile (128 x 128 x 128) takes about 1.5 us.
constexpr double kBlockCost = 5, kCombineCost = 4;

// The blocks of a query tile of nk key tiles, chunks of at most about L: n chunks as even as they
// come, the larger first; causal, the last must start at or before `latest` (the key tile of the
// tile's first query).
inline std::vector<int> chunk_sizes(int nk, int L, int latest) {
  int n = (nk + L - 1) / L;
  while (n > 1 && nk - nk / n > latest) --n;  // the last chunk (nk / n tiles) starts too late
  std::vector<int> sizes(n, nk / n);
  for (int c = 0; c < nk % n; ++c) ++sizes[c];
  return sizes;
}

// The estimated time, in tiles, of the blocks started in list order, each on the SM that frees
// first, `sms` at once.
inline double makespan(const std::vector<flashtma::Item>& items, int sms) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int s = 0; s < sms; ++s) free_at.push(0);
  double end = 0;
  for (const flashtma::Item& it : items) {
    const double t = free_at.top() + it.tiles + kBlockCost;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}

// The key tiles query tile t of br queries sees (bc keys a tile), and the longest of them.
inline int key_tiles(const attn::Dims& a, int br, int bc, int t) {
  return ((a.causal ? std::min(a.seq, (t + 1) * br) : a.seq) + bc - 1) / bc;
}
inline int longest_tiles(const attn::Dims& a, int br, int bc) {
  int longest = 0;
  for (int t = 0; t < (a.seq + br - 1) / br; ++t) longest = std::max(longest, key_tiles(a, br, bc, t));
  return longest;
}
// The plan whose chunks are at most L tiles (L = longest_tiles: no split), its blocks in launch order.
inline Plan plan_for(const attn::Dims& a, int br, int bc, int sms, std::size_t l2_bytes, int L) {
  const int qtiles = (a.seq + br - 1) / br;
  auto key_tiles = [&](int t) { return splitplan::key_tiles(a, br, bc, t); };
  auto latest = [&](int t) { return a.causal ? std::min(key_tiles(t) - 1, t * br / bc) : key_tiles(t) - 1; };
  // The order: longest blocks first across all heads where every head's K and V fit in half the
  // L2 together (few heads); else heads in groups of an eighth of the L2, longest first within a
  // group, so that the blocks running at once share their heads' keys in L2 (all 128 heads at once
  // at d = 128 and seq 4096, 256 MB of keys, ran 1.59 ms against 1.03 by groups).
  const std::size_t head_bytes = std::size_t(a.seq) * a.d * 2 * 2;  // K and V, bf16
  const int group = std::size_t(a.bh()) * head_bytes <= l2_bytes / 2
                  ? a.bh()
                  : int(std::clamp<std::size_t>(l2_bytes / 8 / head_bytes, 1, std::size_t(a.bh())));
  Plan plan;
  for (int h = 0; h < a.bh(); ++h)
    for (int t = 0; t < qtiles; ++t) {
      const std::vector<int> sizes = chunk_sizes(key_tiles(t), L, latest(t));
      const bool split = sizes.size() > 1;
      if (split) plan.combines.push_back({h, t, int(sizes.size()), plan.slots});
      int k0 = 0;
      for (int size : sizes) {
        plan.items.push_back({h, t, k0, size, split ? plan.slots++ : -1});
        k0 += size;
      }
    }
  std::stable_sort(plan.items.begin(), plan.items.end(), [&](const flashtma::Item& x, const flashtma::Item& y) {
    return x.head / group != y.head / group ? x.head < y.head : x.tiles > y.tiles;
  });
  plan.estimate = makespan(plan.items, sms) + (plan.slots > 0 ? kCombineCost : 0);
  return plan;
}
// Persistent blocks (optimized_attention_fused_persistent.cu): the items of a plan without splits,
// in its order, each to the block that the model says frees first (an item costs its tiles and
// kItemCost more: its Q's copy and its first and last products, which the next item's start-up no
// longer hides; a guess of 2 tiles, to be measured; a block's own start-up is the same for all).
// Block b runs items[starts[b]] .. items[starts[b + 1] - 1] in that order; blocks = min(items, sms).
constexpr double kItemCost = 2;
struct Lists {
  std::vector<flashtma::Item> items;
  std::vector<int> starts;
  double estimate = 0;  // the model's time, in tiles (kBlockCost once, then each item's cost)
};
inline Lists persistent_lists(const std::vector<flashtma::Item>& order, int sms) {
  const int blocks = std::min(int(order.size()), sms);
  std::vector<std::vector<flashtma::Item>> per(static_cast<std::size_t>(blocks));
  using Slot = std::pair<double, int>;  // (frees at, block): ties to the lower block
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> free_at;
  for (int b = 0; b < blocks; ++b) free_at.push({kBlockCost, b});
  Lists out;
  for (const flashtma::Item& it : order) {
    const auto [t, b] = free_at.top();
    free_at.pop();
    per[std::size_t(b)].push_back(it);
    free_at.push({t + it.tiles + kItemCost, b});
    out.estimate = std::max(out.estimate, t + it.tiles + kItemCost);
  }
  out.starts.push_back(0);
  for (const auto& list : per) {
    out.items.insert(out.items.end(), list.begin(), list.end());
    out.starts.push_back(int(out.items.size()));
  }
  return out;
}

// A shape's persistent lists on a GPU of `sms` SMs and `l2_bytes` of L2, as step 10 and the PyTorch
// package plan them: the split plan's order without a split (chunks as long as the longest row),
// each item to the block the model frees first.
inline Lists persistent_plan(const attn::Dims& a, int sms, std::size_t l2_bytes) {
  const int br = a.d == 64 ? flashtma::Config<64>::kBr : flashtma::Config<128>::kBr, bc = flashtma::Config<64>::kBc;
  return persistent_lists(plan_for(a, br, bc, sms, l2_bytes, longest_tiles(a, br, bc)).items, sms);
}

inline Plan make_plan(const attn::Dims& a, int br, int bc, int sms, std::size_t l2_bytes) {
  auto plan_for = [&](int L) { return splitplan::plan_for(a, br, bc, sms, l2_bytes, L); };
  const int longest = longest_tiles(a, br, bc);
  Plan best = plan_for(longest);
  // Splitting shortens the last round at most: at 8 rounds or more it cannot gain an eighth.
  if (best.items.size() >= 8 * std::size_t(sms)) return best;
  for (int L = longest - 1; L >= 1; --L) {
    Plan p = plan_for(L);
    if (p.estimate < best.estimate) best = std::move(p);
  }
  return best;
}

}  // namespace splitplan
