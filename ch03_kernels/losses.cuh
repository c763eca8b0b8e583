// The losses: mean softmax cross-entropy over N rows of C logits, and mean squared error.
//   cross_entropy = (1 / K) sum_{r counted} (lse_r - logits[r][label_r]),  lse_r = log sum_j exp(logits[r][j])
//   d cross_entropy / d logits[r][j] = (exp(logits[r][j] - lse_r) - [j == label_r]) / K  (0 for a row not counted)
//   mse = mean_i (pred_i - target_i)^2,                    d mse / d pred_i = 2 (pred_i - target_i) / n
// One read of the logits (or of pred and target) and, backward, one write of the gradient is the
// minimum; the yardstick is the copy bandwidth. The backward of the cross-entropy takes each row's
// log-sum-exp from the forward (N floats), as a framework would keep it.
//
// A row whose label is `ignore_index` (-100, PyTorch's default, as a padded batch marks its
// padding) is not counted: no loss, a zero row of gradient, and the mean is over the K rows that
// are counted, as torch.nn.functional.cross_entropy(..., ignore_index=-100). The forward writes K
// (`count`, a float as PyTorch's total_weight), the backward reads it. With no row counted the
// mean is 0/0, NaN, as PyTorch's; the lab's own inputs always count row 0. The lab's inputs mark
// about one row in 16 ignored, so that every check and every timing has them.
//
// Any other label outside [0, C) cannot be read safely and has no loss: every cross-entropy kernel
// checks it, writes NaN for that row (loss or gradient row) instead of reading out of bounds, and
// records the row in `bad_row`, which verify() reports as the error ("label 40000 at row 17 is
// outside [0, 32768)"), never as a wrong number.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "lab/lab.hpp"
#include "lab/storage.hpp"
#include "rows.cuh"

namespace loss {

// A running softmax denominator: s = sum exp(x - m) over the values seen, m their maximum.
// Merging two is exact up to rounding; it lets one pass over a row find its log-sum-exp (the
// online softmax).
// A plain aggregate (it lives in shared memory too): start from Online::empty().
struct Online {
  float m, s;
  __device__ __forceinline__ static Online empty() { return {-INFINITY, 0.f}; }
  __device__ __forceinline__ void add(float x) {
    if (x > m) {
      s = s * __expf(m - x) + 1.f;
      m = x;
    } else {
      s += __expf(x - m);
    }
  }
  __device__ __forceinline__ void merge(Online o) {
    const float mm = fmaxf(m, o.m);
    if (mm == -INFINITY) return;  // both empty
    s = s * __expf(m - mm) + o.s * __expf(o.m - mm);
    m = mm;
  }
  __device__ __forceinline__ float lse() const { return m + __logf(s); }
};

// The same over the kLanes threads of a row group (rows.cuh's convention); every thread gets it.
template <int kLanes>
__device__ __forceinline__ Online group_merge(Online v, Online* scratch) {
  constexpr int kWidth = kLanes < 32 ? kLanes : 32;
  const unsigned mask = rows::group_mask<kWidth>();
#pragma unroll
  for (int o = kWidth / 2; o > 0; o /= 2) {
    v.merge({__shfl_xor_sync(mask, v.m, o), __shfl_xor_sync(mask, v.s, o)});
  }
  if constexpr (kLanes > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < kLanes / 32; ++w) v.merge(scratch[w]);
  }
  return v;
}

// Whether a row's label is used, is the ignore_index (the row not counted), or is bad: a bad one's
// row is remembered in bad_row (any one of the bad rows). The ignore_index is tested first: it may
// be a class (PyTorch lets ignore_index = 0 drop the rows of class 0).
enum class Label { kUsed, kIgnored, kBad };
__device__ __forceinline__ Label label_kind(int label, int classes, int ignore_index, std::size_t row,
                                            long long* bad_row) {
  if (label == ignore_index) return Label::kIgnored;
  if (label >= 0 && label < classes) return Label::kUsed;
  *bad_row = static_cast<long long>(row);
  return Label::kBad;
}

// The sum of an unsigned count over a block of kThreads threads (a multiple of 32), in thread 0.
// Every thread must call it; `scratch` holds kThreads / 32 values.
template <int kThreads>
__device__ __forceinline__ unsigned block_count(unsigned v, unsigned* scratch) {
  v = __reduce_add_sync(0xffffffffu, v);
  __syncthreads();  // scratch may still be read by a previous call
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  unsigned total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  return total;
}

// Threads per row for the row-wise cross-entropy kernels, with 16-byte loads when the row length
// is a multiple of 4 (V = 4, else V = 1). Rows up to 8192 classes: the fewest lanes, a power of
// two from 2 to 32, that leave a lane at most 4 chunks (V floats each) of the row, so short rows
// are packed several to a warp (64 classes: 4 lanes of 4 float4s, 8 rows a warp) and a row costs
// few shuffle steps; rows of 512 classes and more get a warp (a lane streams up to 64 float4s:
// plenty in flight, no block-wide barrier per row). Beyond 8192 classes, 512 threads a row. Calls
// f(std::integral_constant<int, lanes>, std::integral_constant<int, V>).
inline int row_lanes(int classes) {
  if (classes > 8192) return 512;
  const int chunks = classes % 4 == 0 ? classes / 4 : classes;
  int lanes = 2;
  while (lanes < 32 && lanes * 4 < chunks) lanes *= 2;
  return lanes;
}
template <class F>
void with_row_lanes(int classes, F&& f) {
  using std::integral_constant;
  const auto with_v = [&](auto lanes) {
    classes % 4 == 0 ? f(lanes, integral_constant<int, 4>{}) : f(lanes, integral_constant<int, 1>{});
  };
  switch (row_lanes(classes)) {
    case 2: return with_v(integral_constant<int, 2>{});
    case 4: return with_v(integral_constant<int, 4>{});
    case 8: return with_v(integral_constant<int, 8>{});
    case 16: return with_v(integral_constant<int, 16>{});
    case 32: return with_v(integral_constant<int, 32>{});
    default: return with_v(integral_constant<int, 512>{});
  }
}

// The last step of every loss: *out = (sum of the n values, added in a fixed order by one block)
// / divisor. The MSE divides its per-block partial sums by the element count.
void sum_over(const float* values, std::size_t n, double divisor, float* out, cudaStream_t s);
// The cross-entropy's: *out = (sum of the n values, in a fixed order) / K, where K, the number of
// nonzero `counted` flags, is also written to *count (as a float). NaN when K is 0, as 0/0.
void mean_over_counted(const float* values, const std::uint8_t* counted, std::size_t n, float* out, float* count,
                       cudaStream_t s);

// The cross-entropy backward's reference: dlogits = g (exp(x - lse) - onehot) / k for a counted row,
// 0 for an ignored one, in double from the logits as the kernel sees them (fp32 values; 16-bit ones
// widened, exactly) and the saved lse; with the rounding a correct fp32 kernel may make in each.
// Slack: p = exp(x - lse) with a = x - lse rounded (u |a|) and __expf's 2 + 1.2 |a| ulp: at most
// (4 + 3.4 |a|) u of p; then the subtraction of the label's 1, and dloss / K (two roundings
// whichever way it is formed) times that, u each. An ignored row is exactly 0. rounding: the
// relative error of dlogits' rounding to its storage (0 for fp32, 2^-8 for bf16, 2^-11 for fp16),
// which may enlarge that slack by its own share; floor: that rounding's absolute bound below the
// storage's normal range (fp16's 2^-25), added to every element's slack so that the whole-output
// bound holds it (in fp16 most of a wide row's dlogits are subnormal or zero).
struct GradReference {
  std::vector<double> dlogits, slack;
};
inline GradReference grad_reference(const std::vector<float>& hx, const std::vector<std::int32_t>& hl,
                                    const std::vector<float>& hlse, double g, double k, int rows, int classes,
                                    std::int32_t ignore_index, double rounding, double floor = 0) {
  constexpr double u = lab::fp32::kUnitRoundoff;
  GradReference out{std::vector<double>(hx.size(), 0.0), std::vector<double>(hx.size(), 0.0)};
  for (int r = 0; r < rows; ++r) {
    if (hl[r] == ignore_index) continue;
    for (int j = 0; j < classes; ++j) {
      const std::size_t i = std::size_t(r) * classes + j;
      const double a = double(hx[i]) - hlse[r], p = std::exp(a), y = j == hl[r] ? 1.0 : 0.0;
      out.dlogits[i] = g * (p - y) / k;
      out.slack[i] =
          std::fabs(g) * ((4 + 3.4 * std::fabs(a)) * u * p + 3 * u * std::fabs(p - y)) / k * (1 + rounding) + floor;
    }
  }
  return out;
}

}  // namespace loss

// What both cross-entropy topics hold and check.
struct CrossEntropyShapes {
  static constexpr int chapter = 3;
  static std::vector<std::string> dims() { return {"rows", "classes"}; }
  // A language model's vocabularies: 32768 and GPT-2's 50304.
  static std::vector<lab::Shape> sweep() { return {{8192, 32768}, {4096, 50304}}; }
  // A single class too: the loss and its gradient are then identically zero, checked element by
  // element (the NaN poison catches an unwritten one). Short rows in float4s too (4, 8, 64 and 512
  // classes: 2 to 32 lanes a row, several rows a warp below 32), at row counts that end mid-block;
  // until 2026-11-28 no check shape had them (the sweep verified them at its own shapes).
  static std::vector<lab::Shape> checks() {
    return {{1, 1},    {2, 1},    {13, 1},   {1, 2},    {3, 5},    {7, 33},   {1000, 10}, {2, 4},
            {4099, 8}, {1000, 64}, {37, 512}, {64, 768}, {5, 2048}, {5, 2049}, {3, 4096}, {2, 50304},
            {2, 50257}};
  }
  static std::string validate(const lab::Shape& s) {
    if (s[1] > std::numeric_limits<std::int32_t>::max()) return "classes below 2^31 (labels are int32)";
    return double(s[0]) * double(s[1]) > double(std::int64_t{1} << 32) ? "at most 2^32 logits" : "";
  }
};

// Shared by both directions and both storages: labels, the ignore_index, the bad-label slot, and
// the check that reads it (CrossEntropyLogits adds the logits in their storage).
struct CrossEntropyInputs : lab::Problem {
  static constexpr std::int32_t kIgnoreIndex = -100;  // PyTorch's default
  int rows, classes;
  std::int32_t ignore_index = kIgnoreIndex;  // a row with this label is not counted
  lab::DeviceBuffer<std::int32_t> labels;
  lab::DeviceBuffer<long long> bad_row;  // -1, or a row whose label is outside [0, classes) and not ignored
  explicit CrossEntropyInputs(const lab::Shape& s)
      : rows(static_cast<int>(s[0])), classes(static_cast<int>(s[1])), labels(rows), bad_row(1) {}
  // The labels, drawn after the logits (CrossEntropyLogits).
  void draw_labels(lab::Rng& rng) {
    rng.integers(labels, 0, classes);
    // About one row in 16 ignored, as padding marks it; never row 0, so that some row counts.
    std::vector<std::int32_t> hl = labels.download();
    std::vector<std::int32_t> pick(hl.size());
    rng.integers(std::span<std::int32_t>(pick), 0, 16);
    for (std::size_t r = 1; r < hl.size(); ++r)
      if (pick[r] == 0) hl[r] = ignore_index;
    labels.upload(hl);
  }
  CrossEntropyInputs(const lab::Shape& s, lab::Borrowed)
      : rows(static_cast<int>(s[0])), classes(static_cast<int>(s[1])), bad_row(1) {}
  // Every variant calls this first (no bad row yet), or writes bad_row itself on every run.
  void clear_bad_row(cudaStream_t s) { LAB_CHECK(cudaMemsetAsync(bad_row.data(), 0xff, sizeof(long long), s)); }
  // "" when every label was in range; otherwise the error, naming the label and the row.
  std::string label_error() {
    const long long r = bad_row.download()[0];
    if (r < 0) return "";
    const auto hl = labels.download();
    return "label " + std::to_string(hl[static_cast<std::size_t>(r)]) + " at row " + std::to_string(r) +
           " is outside [0, " + std::to_string(classes) + ")";
  }
  // The log-sum-exp of every row, in double.
  std::vector<double> reference_lse(const std::vector<float>& hx) const { return reference_lse(hx, nullptr); }
  // With `slack`, also the error a correct fp32 kernel may make in each row's lse. The sum of
  // exp(x - max) has C positive terms; the kernels use __expf (2 + 1.2 |a| ulp for an argument a,
  // an ulp being 2u) and may rescale a running sum when the maximum moves (the online softmax), up
  // to 64 times a path (records of the maximum, then the warp's and block's merges) with an
  // exp of 4u each, whose arguments add up to at most the row's range A. So the sum errs by
  // sum_error(C + 256) + 7 A u relative, and its log by as much absolutely; __logf adds 2^-21.41 (or
  // 3 ulp of log s), and the addition of the maximum u |lse|.
  std::vector<double> reference_lse(const std::vector<float>& hx, std::vector<double>* slack) const {
    constexpr double u = lab::fp32::kUnitRoundoff;
    std::vector<double> lse(rows);
    if (slack) slack->assign(rows, 0.0);
    const double e_sum = lab::fp32::sum_error(classes + 256.0);
    for (int r = 0; r < rows; ++r) {
      const float* row = hx.data() + std::size_t(r) * classes;
      double m = -INFINITY, lo = INFINITY, s = 0;
      for (int j = 0; j < classes; ++j) m = std::max(m, double(row[j])), lo = std::min(lo, double(row[j]));
      for (int j = 0; j < classes; ++j) s += std::exp(row[j] - m);
      lse[r] = m + std::log(s);
      if (slack) (*slack)[r] = e_sum + 7 * (m - lo) * u + 0x1p-21 + 6 * u * std::log(s) + u * std::fabs(lse[r]);
    }
    return lse;
  }
  // The rows that count (label not the ignore_index), as K = their number.
  std::size_t counted(const std::vector<std::int32_t>& hl) const {
    std::size_t k = 0;
    for (const std::int32_t l : hl) k += l != ignore_index;
    return k;
  }
  static lab::Verdict label_failure(std::string what, std::string error) {
    lab::Verdict v;
    v.what = std::move(what);
    v.reason = std::move(error);
    return v;
  }
};

// The logits in their storage T (float, or bf16 or fp16: fp32 arithmetic on the widened values, as
// PyTorch's cross_entropy on 16-bit logits), drawn before the labels.
template <class T>
struct CrossEntropyLogits : CrossEntropyInputs {
  using S = lab::StorageOf<T>;
  lab::DeviceBuffer<T> logits;
  CrossEntropyLogits(const lab::Shape& s, lab::Rng& rng)
      : CrossEntropyInputs(s), logits(std::size_t(rows) * classes) {
    rng.uniform(logits, -8.f, 8.f);  // e^16 between the largest and smallest: max subtraction matters
    draw_labels(rng);
  }
  CrossEntropyLogits(const lab::Shape& s, lab::Borrowed b) : CrossEntropyInputs(s, b) {}
  std::vector<float> logits_host() { return S::to_float(logits.download()); }
};

// T: the logits' storage (float, bf16 or fp16). The loss, the count and each row's lse are fp32 in all
// (PyTorch's 16-bit loss is this fp32 mean rounded once, a scalar).
template <class T>
struct CrossEntropyOf : CrossEntropyShapes {
  static constexpr const char* name =
      lab::StorageOf<T>::pick("cross_entropy", "cross_entropy_bf16", "cross_entropy_fp16");
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), c = double(s[1]);
    // logits and labels in, the loss and the count out
    return {.bytes = sizeof(T) * n * c + 4.0 * (n + 2), .flops = 0, .written = 8};
  }
  // The loss and the count of rows counted always; each row's log-sum-exp from the variants that
  // declare it (.writes = {"lse"}): the statistic the backward reads, as a training step keeps it.
  struct Problem : CrossEntropyLogits<T> {
    using Base = CrossEntropyLogits<T>;
    using Base::rows, Base::classes, Base::ignore_index, Base::labels;
    lab::DeviceBuffer<float> loss, count, lse;  // the mean; K; each row's lse
    Problem(const lab::Shape& s, lab::Rng& rng) : Base(s, rng), loss(1), count(1), lse(rows) {}
    Problem(const lab::Shape& s, lab::Borrowed b) : Base(s, b) {}
    void poison(cudaStream_t s) override {
      lab::poison(loss, s);
      lab::poison(count, s);
      lab::poison(lse, s);
    }
    lab::Verdict verify() override {
      if (const std::string e = this->label_error(); !e.empty()) return this->label_failure("loss", e);
      const auto hx = this->logits_host();
      const auto hl = labels.download();
      std::vector<double> lse_slack;
      const auto lse_ref = this->reference_lse(hx, &lse_slack);
      // Each counted row's loss is lse - x[label] (its slack: lse's, and the subtraction's
      // rounding); the mean adds K of them in any order and divides by K.
      lab::Sum total;
      double row_slack = 0;
      for (int r = 0; r < rows; ++r) {
        if (hl[r] == ignore_index) continue;
        const double l = lse_ref[r] - hx[std::size_t(r) * classes + hl[r]];
        total.add(l);
        row_slack += lse_slack[r] + lab::fp32::kUnitRoundoff * std::fabs(l);
      }
      const double k = double(this->counted(hl));
      const std::vector<double> ref{total.value / k},
          slack{(row_slack + lab::fp32::sum_error(k + 1.0) * total.magnitude) / k};
      lab::Verdict v = lab::compare(loss.download(), ref, lab::Tolerance::fp32(), "loss", {}, slack);
      v.also(lab::compare(count.download(), std::vector<double>{k}, lab::Tolerance::exact(), "count"));
      if (this->declared().writes_output("lse"))
        v.also(lab::compare(lse.download(), lse_ref, lab::Tolerance::fp32(), "lse", {}, lse_slack));
      return v;
    }
  };
};

// T: the storage of the logits and of dlogits (float, bf16 or fp16); lse, dloss and the count fp32.
template <class T>
struct CrossEntropyBackwardOf : CrossEntropyShapes {
  using S = lab::StorageOf<T>;
  static constexpr const char* name =
      S::pick("cross_entropy_backward", "cross_entropy_backward_bf16", "cross_entropy_backward_fp16");
  // dlogits' bound: fp32's, and in 16 bits its one rounding on top (with the slack below: in fp16
  // most of dlogits may lie below the normal range, (softmax - onehot) / K for many rows).
  static lab::Tolerance dlogits_tolerance() { return S::fp32_rounded(); }
  static lab::Work work(const lab::Shape& s) {
    const double n = double(s[0]), c = double(s[1]);
    // logits, labels, lse, dloss and the count in; dlogits out
    return {.bytes = 2.0 * sizeof(T) * n * c + 4.0 * (2 * n + 2), .flops = 0, .written = sizeof(T) * n * c};
  }
  // dlogits = dloss (softmax(logits) - onehot(label)) / K for a counted row, 0 for an ignored one:
  // dloss is the gradient that reaches the mean loss (1 when the loss is the objective; a loss
  // scale, or a weight in a sum of losses), K the forward's count.
  struct Problem : CrossEntropyLogits<T> {
    using Base = CrossEntropyLogits<T>;
    using Base::rows, Base::classes, Base::ignore_index, Base::labels, Base::logits;
    lab::DeviceBuffer<float> lse, dloss, count;
    lab::DeviceBuffer<T> dlogits;
    Problem(const lab::Shape& s, lab::Rng& rng) : Base(s, rng), lse(rows), dloss(1), count(1), dlogits(logits.size()) {
      const auto r = this->reference_lse(this->logits_host());  // the forward's saved statistics
      lse.upload(std::vector<float>(r.begin(), r.end()));
      count.upload(std::vector<float>{float(this->counted(labels.download()))});
      rng.uniform(dloss, 0.5f, 2.f);
    }
    Problem(const lab::Shape& s, lab::Borrowed b) : Base(s, b) {}
    void poison(cudaStream_t s) override { lab::poison(dlogits, s); }
    lab::Verdict verify() override {
      if (const std::string e = this->label_error(); !e.empty()) return this->label_failure("dlogits", e);
      const auto hx = this->logits_host();
      const auto hl = labels.download();
      const auto hlse = lse.download();
      const double g = dloss.download()[0], k = count.download()[0];
      const loss::GradReference ref =
          loss::grad_reference(hx, hl, hlse, g, k, rows, classes, ignore_index, S::kRounding, S::kFloor);
      return lab::compare(S::to_float(dlogits.download()), ref.dlogits, dlogits_tolerance(), "dlogits", {rows, classes},
                          ref.slack);
    }
  };
};

// The cross-entropy on the storage this file is compiled for (lab::Stored: a storage twin's 16 bits),
// and on each storage by name.
using CrossEntropy = CrossEntropyOf<lab::Stored>;
using CrossEntropyFp32 = CrossEntropyOf<float>;
using CrossEntropyBf16 = CrossEntropyOf<__nv_bfloat16>;
using CrossEntropyFp16 = CrossEntropyOf<__half>;
using CrossEntropyBackward = CrossEntropyBackwardOf<lab::Stored>;
using CrossEntropyBackwardFp32 = CrossEntropyBackwardOf<float>;
using CrossEntropyBackwardBf16 = CrossEntropyBackwardOf<__nv_bfloat16>;
using CrossEntropyBackwardFp16 = CrossEntropyBackwardOf<__half>;

// Mean squared error over n elements (pred and target: any shape, flattened): the activations'
// flat-array shapes (elementwise.cuh).
using MseShapes = ew::FlatShapes;

struct MseInputs : lab::Problem {
  std::size_t n;
  lab::DeviceBuffer<float> pred, target;
  MseInputs(const lab::Shape& s, lab::Rng& rng) : n(static_cast<std::size_t>(s[0])), pred(n), target(n) {
    rng.uniform(pred, -1.f, 1.f);
    rng.uniform(target, -1.f, 1.f);
  }
};

struct Mse : MseShapes {
  static constexpr const char* name = "mse";
  static lab::Work work(const lab::Shape& s) { return {.bytes = 8.0 * double(s[0]) + 4, .flops = 0, .written = 4}; }
  struct Problem : MseInputs {
    lab::DeviceBuffer<float> loss;  // the mean
    Problem(const lab::Shape& s, lab::Rng& rng) : MseInputs(s, rng), loss(1) {}
    void poison(cudaStream_t s) override { lab::poison(loss, s); }
    lab::Verdict verify() override {
      const auto hp = pred.download(), ht = target.download();
      // n positive terms (a difference and a square each), added in any order, then divided.
      lab::Sum total;
      for (std::size_t i = 0; i < n; ++i) total.add((double(hp[i]) - ht[i]) * (double(hp[i]) - ht[i]));
      const double nd = double(n);
      const std::vector<double> ref{total.value / nd}, slack{lab::fp32::sum_error(nd + 3) * total.magnitude / nd};
      return lab::compare(loss.download(), ref, lab::Tolerance::fp32(), "loss", {}, slack);
    }
  };
};

struct MseBackward : MseShapes {
  static constexpr const char* name = "mse_backward";
  static lab::Work work(const lab::Shape& s) {
    return {.bytes = 12.0 * double(s[0]), .flops = 0, .written = 4.0 * double(s[0])};  // pred, target in; dpred out
  }
  struct Problem : MseInputs {
    lab::DeviceBuffer<float> dpred;
    Problem(const lab::Shape& s, lab::Rng& rng) : MseInputs(s, rng), dpred(n) {}
    void poison(cudaStream_t s) override { lab::poison(dpred, s); }
    lab::Verdict verify() override {
      const auto hp = pred.download(), ht = target.download();
      std::vector<double> ref(n);
      for (std::size_t i = 0; i < n; ++i) ref[i] = 2.0 * (double(hp[i]) - ht[i]) / double(n);
      return lab::compare(dpred.download(), ref, lab::Tolerance::fp32(), "dpred");
    }
  };
};
