// The fused GPT-2 step's schedule (FusedStep): what runs in which order on which stream, captured
// as one CUDA graph. Its kernels are in kernels.cuh, what it keeps for the backward in saved.cuh,
// and the two policies it is written over (the products, the attention) in policies.cuh. A fused
// step file is one line of FusedStep<Products, Attention> and its policies.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "gpt2/fused/flat_adamw.cuh"
#include "gpt2/fused/gelu_product.cuh"
#include "gpt2/fused/kernels.cuh"
#include "gpt2/fused/policies.cuh"
#include "gpt2/fused/saved.cuh"
#include "gpt2/gpt2.cuh"
#include "lab/launch.hpp"

namespace {

template <class Products, class Attention = FlashFp32>
struct FusedStep {
  static_assert(policy::Products<Products>, "a Products policy: kPrecision, a constructor from "
                "(const gpt2::Config&, gpt2::Phase), linear() and linear_backward() (policies.cuh)");
  static_assert(!policy::NamesHead<Products> || policy::HeadProducts<Products>,
                "a Products policy's head() has linear()'s signature");
  static_assert(!policy::NamesHeadBackward<Products> || policy::HeadBackwardProducts<Products>,
                "a Products policy's head_backward() has linear_backward()'s signature");
  static_assert(!policy::NamesLinearBias<Products> || policy::LinearBiasProducts<Products>,
                "a Products policy's linear_bias() takes bf16 operands and writes bf16 (policies.cuh)");
  static_assert(!policy::NamesBackwardBf16<Products> || policy::BackwardBf16Products<Products>,
                "a Products policy's linear_backward_bf16() reads and writes bf16 dY and dX (policies.cuh)");
  static_assert(!policy::NamesSplitBackward<Products> || policy::SplitBackwardProducts<Products>,
                "a Products policy's linear_dx_bf16() and linear_dw() come together, with bf16 dY and dX "
                "(policies.cuh)");
  static_assert(!policy::NamesGeluInFlight<Products> || policy::NamesSplitBackward<Products>,
                "a Products policy's kGeluInFlight comes with linear_dx_bf16() and linear_dw() (policies.cuh)");
  static_assert(!policy::NamesHeadBf16<Products> || policy::HeadBf16Products<Products>,
                "a Products policy's head_bf16() reads bf16 and writes bf16 logits, its dY in bf16 (policies.cuh)");
  static_assert(policy::Attention<Attention>, "an Attention policy: kPrecision, a constructor from "
                "(const gpt2::Config&, gpt2::Phase), forward() and backward() (policies.cuh)");
  static_assert(!policy::NamesRows<Attention> || policy::WritesRows<Attention>,
                "an Attention policy's kWritesRows comes with forward_rows() and backward_rows() (policies.cuh)");
  using Topic = Gpt2Step;
  gpt2::Config c;
  gpt2::Phase phase;
  gpt2::Offsets off;
  int rows, d, hd, dp;  // dp: the heads' width in the flash kernels (hd, or hd padded with zeros)
  lab::CublasHandle blas;
  lab::DeviceBuffer<std::uint8_t> blas_workspace;  // cuBLAS's, set explicitly: a graph may not allocate
  using Op = typename operand_of<Products>::type;       // the products' activations: float or bf16
  using Grad = typename grad_of<Products>::type;        // the products' dY: float or bf16
  using HeadOp = typename operand_of<Attention>::type;  // the attention's Q, K, V, dO
  // kKeepLn: every LayerNorm's output is kept with the saved tensors (Saved's ln1 and ln2, the
  // head's ln), where the backward made it again into ln (layer_norm_again) before its products.
  static constexpr bool kKeepLn = policy::NamesKeepLayerNorm<Products>;
  using Block = Saved<Op, HeadOp, kKeepLn>;
  // kRows: the attention writes O, dK and dV where the products read them (policy::WritesRows).
  static constexpr bool kRows = policy::WritesRows<Attention>;
  // kBias: the products' epilogue adds the QKV product's and the MLP's first biases (their bf16
  // copies) and writes bf16 (policy::LinearBiasProducts): the passes after them read bf16 and add no
  // bias.
  static constexpr bool kBias = policy::NamesLinearBias<Products>;
  // kDact: the MLP's second product writes its input gradient (GELU's output's) in bf16
  // (policy::BackwardBf16Products), which GELU's backward reads.
  static constexpr bool kDact = policy::NamesBackwardBf16<Products>;
  // kGeluOnce: the MLP's second product's backward runs as its two products (policy::
  // SplitBackwardProducts), and GELU's backward between them makes GELU's output, which the second
  // (dW) reads, where a pass of its own made it before both; dh is then in place of dact.
  static constexpr bool kGeluOnce = policy::NamesSplitBackward<Products>;
  // kGeluInFlight: that GELU backward with eight columns a thread and four rows' loads in flight
  // (gelu_backward_act_in_flight: kernels.cuh).
  static constexpr bool kGeluInFlight = policy::NamesGeluInFlight<Products>;
  // kLogitsBf16: the head's product writes the logits in bf16 (policy::HeadBf16Products), which the
  // loss reads, and over which it writes their gradient (Logit: the logits' type).
  static constexpr bool kLogitsBf16 = policy::NamesHeadBf16<Products>;
  // kLossInFlight: the loss by the row kernel with more bytes in flight where the vocabulary allows
  // (cross_entropy_vecs_kernel: kernels.cuh; 16-byte loads, 256 threads a row).
  static constexpr bool kLossInFlight = policy::NamesLossInFlight<Products>;
  static_assert(!kLossInFlight || kLogitsBf16, "kLossInFlight's loss kernel reads bf16 logits (head_bf16)");
  // kRoundAhead: with a backward, every stage's weights rounded into their bf16 copies on the side
  // stream at the start of the step, each block's products waiting for its own stage's copy alone,
  // where the lead stream rounded each stage before its products (see forward()).
  static constexpr bool kRoundAhead = policy::NamesRoundAhead<Products>;
  static_assert(!kRoundAhead || !std::is_same_v<Op, float>, "kRoundAhead rounds the weights' copies: bf16 products");
  // kAdamWRounds: in the full step, AdamW writes each updated parameter's bf16 value into the copy
  // the next step's products read, where that copy outlives the step (its stage's saved tensors in
  // the spill buffer: copy_kept), and the next step does not round that stage; the stages whose
  // saved tensors lie in the gradients' buffer, which the backward writes over, are rounded ahead as
  // kRoundAhead's (see adamw_rounds()).
  static constexpr bool kAdamWRounds = policy::NamesAdamWRounds<Products>;
  static_assert(!kAdamWRounds || (kRoundAhead && std::is_same_v<Op, __nv_bfloat16>),
                "kAdamWRounds writes bf16 copies, and rounds the other stages ahead (kRoundAhead)");
  // kLnGradBf16: the products before the LayerNorms' backward (the head's, the MLP's first, the QKV
  // product's) write their input gradient, the LayerNorm's dy, in bf16, as linear_dx_bf16() and
  // linear_dw() one at a time, and the LayerNorm backward reads it so (ln_grad_backward()), where
  // they wrote it in fp32.
  static constexpr bool kLnGradBf16 = policy::NamesLnGradBf16<Products>;
  static_assert(!kLnGradBf16 || (kGeluOnce && !policy::NamesHeadBackward<Products>),
                "kLnGradBf16 runs the products' backward as linear_dx_bf16() and linear_dw(), the head's too");
  using LnGrad = std::conditional_t<kLnGradBf16, Grad, float>;  // a LayerNorm's dy, as its product writes it
  // kGeluInProduct: the MLP's second product's input gradient by dx_dgelu (gelu_product.cuh), GELU's
  // backward in its epilogue, where dx_dgelu_fits() says it runs; elsewhere the two launches before.
  static constexpr bool kGeluInProduct = policy::NamesGeluInProduct<Products>;
  static_assert(!kGeluInProduct || (kGeluInFlight && kLnGradBf16 && std::is_same_v<Op, __nv_bfloat16> &&
                                    std::is_same_v<Grad, __nv_bfloat16>),
                "kGeluInProduct replaces step 14's in-flight GELU backward, on bf16 operands and gradients");
  // kGeluForwardInProduct: the MLP's first product by bias_gelu (gelu_product.cuh), its bias and GELU
  // in its epilogue, where bias_gelu_fits() says it runs; elsewhere linear_bias() and gelu().
  static constexpr bool kGeluForwardInProduct = policy::NamesGeluForwardInProduct<Products>;
  // (It does not need kGeluInProduct: either may come first in the ladder, as the GPU's timings say.)
  static_assert(!kGeluForwardInProduct || (kBias && kLnGradBf16 && std::is_same_v<Op, __nv_bfloat16>),
                "kGeluForwardInProduct replaces the bias epilogue's product and gelu(), on bf16 operands");
  // kQkvRows: the attention reads Q, K and V from the QKV product's rows where its qkv_rows() says
  // (policy::ReadsQkvRows): the product writes them, bias added, where the saved Q, K and V lie, and
  // no pass lays them out by head (reads_qkv_rows()).
  static constexpr bool kQkvRows = policy::NamesQkvRows<Attention>;
  static_assert(!kQkvRows || (policy::ReadsQkvRows<Attention> && kBias && !std::is_same_v<Grad, float>),
                "kReadsQkvRows comes with qkv_rows(), forward_qkv_rows() and backward_qkv_rows() (policies.cuh), "
                "and reads the rows the bias epilogue writes in bf16, its gradients' rows in bf16");
  static bool reads_qkv_rows(const gpt2::Config& c) {
    if constexpr (kQkvRows) return Attention::qkv_rows(c);
    return false;
  }
  using Logit = std::conditional_t<kLogitsBf16, Op, float>;
  static_assert(!kRows || (std::is_same_v<Op, __nv_bfloat16> && std::is_same_v<Grad, __nv_bfloat16> &&
                           std::is_same_v<HeadOp, __nv_bfloat16>),
                "an attention that writes the products' rows needs them in bf16, dY too");
  using Head = HeadSaved<Op, Logit, kKeepLn>;
  std::vector<Block> blocks;  // every block's saved tensors (the forward alone: one block's, reused)
  Head head;
  Buffer spill;  // the saved tensors that the gradients' buffer cannot take (see place_saved)
  std::vector<bool> copy_kept;  // a stage's weights' copy outlives the step (kAdamWRounds: adamw_rounds())
  Buffer losses, coef;
  Buffer qkv, o, tmp;           // forward scratch (o: by head, not with kRows); the backward's dQKV lies in qkv
  lab::DeviceBuffer<Op> ln, act;  // a LayerNorm's output and GELU's: made by the forward, and by the backward again
                                  // (act: none in the forward alone with kBias, GELU in place: act_size;
                                  // ln: none with kKeepLn, the outputs kept: ln_at)
  Buffer dx, dln, delta, wide;  // backward scratch; wide: dact (dh in place), later dq, dk, dv; in
                                // the forward, the MLP's first product when h is kept in bf16
  lab::DeviceBuffer<HeadOp> dout;
  // kGradCopies: each product's dY in Grad, written by the kernel that makes it (up to the head's
  // B T x V, unless kLogitsBf16 has it over the logits); and the MLP's second bias gradient, which
  // the LayerNorm backward above the block sums (carry_db: see backward()).
  static constexpr bool kGradCopies = !std::is_same_v<Grad, float>;
  lab::DeviceBuffer<Grad> gy;
  Buffer carry_db;
  Products products;    // the linear layers' matrix products: the variant file's
  Attention attention;  // the flash attention: FlashFp32, or the variant file's
  // The step runs on `lead`, at the device's highest priority; AdamW runs on `side`, at its lowest,
  // a stage at a time as soon as the backward has finished that stage's gradients (see step()).
  lab::Stream lead{priority(true)}, side{priority(false)};
  std::deque<lab::Event> forks;  // the points where one stream waits for another
  lab::GraphExec graph;

  static int priority(bool highest) {
    int least = 0, greatest = 0;
    LAB_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return highest ? greatest : least;
  }

  // The products' arithmetic, and the attention's where it differs ("fp32+3xtf32-attention"):
  // gpt2::ModelOptions::for_precision reads both.
  static lab::Declared declared() {
    const std::string attention = Attention::kPrecision;
    if (attention == "fp32") return {.precision = Products::kPrecision};
    return {.precision = std::string(Products::kPrecision) + "+" + attention + "-attention"};
  }

  // What the attention policy needs of the device, where it says (policy::AttentionSupports).
  static std::string supports(const lab::Shape& s, const lab::DeviceFacts& dev) {
    const gpt2::Config c = gpt2::config_of(s);
    const int hd = c.head_dim();
    if (flash_width(hd) == 0) return "the flash kernels take head sizes up to 128, not " + std::to_string(hd);
    if (c.d > kMaxItems * kThreads) return "the row kernels hold d_model <= 4096 in registers";
    if constexpr (policy::AttentionSupports<Attention>) return Attention::supports(dev);
    return "";
  }

  FusedStep(Gpt2Step::Problem& p, cudaStream_t stream)
      : c(p.cfg), phase(p.phase), off(gpt2::offsets(c)), rows(int(c.tokens())), d(c.d), hd(c.head_dim()),
        dp(flash_width(hd)), blas_workspace(std::size_t(32) << 20), losses(rows), coef(2), qkv(qkv_floats(c, phase)),
        o(kRows ? 0 : heads_size(c)), tmp(c.tokens() * d), ln(kKeepLn ? 0 : c.tokens() * d), act(act_size(c, phase)),
        products(c, phase), attention(c, phase) {
    place_saved(p);
    const std::size_t n = c.tokens() * d, nh = heads_size(c);
    if (phase != gpt2::Phase::forward) {
      dx = Buffer(n), dln = Buffer(n), delta = Buffer(c.tokens() * c.heads), dout = lab::DeviceBuffer<HeadOp>(nh);
      wide = Buffer(std::max(4 * n, 3 * nh));
      if (kGradCopies)
        gy = lab::DeviceBuffer<Grad>(c.tokens() * std::max<std::size_t>(4 * d, kLogitsBf16 ? 0 : c.vocab)),
        carry_db = Buffer(d);
    } else if (kCopies && !kBias) {
      wide = Buffer(4 * n);
    }
    ops::use_stream(blas, lead);
    LAB_CHECK(cublasSetWorkspace(blas, blas_workspace.data(), blas_workspace.size()));
    // The same workspace for the products' other library (cuBLASLt): both run on `lead`, one after
    // the other.
    if constexpr (policy::NamesWorkspace<Products>)
      products.use_workspace(blas_workspace.data(), blas_workspace.size());
    // The copies that AdamW keeps up to date, made once here from the parameters as they are given:
    // the first step's forward reads them.
    for (int l = 0; l <= c.layers; ++l)
      if (adamw_rounds(l))
        round_weights(p.params.data(), gpt2::stage_begin(c, l), stage_end(l, p.params.size()), stage_copy(l), stream);
    graph.capture(
        stream,
        [&] {
          wait(lead, stream);
          step(p, lead);
          wait(stream, lead);
        },
        cudaGraphInstantiateFlagUseNodePriority);
  }

  // `later` waits for what `earlier` has launched so far (in a capture: an edge of the graph).
  void wait(cudaStream_t later, cudaStream_t earlier) {
    forks.emplace_back().record(earlier);
    LAB_CHECK(cudaStreamWaitEvent(later, forks.back()));
  }

  void run(Gpt2Step::Problem& p, cudaStream_t stream) {
    if (phase == gpt2::Phase::step) {
      // The step's bias corrections, from pageable memory: staged before the call returns.
      const auto at = flat_adamw::Coef::at_step(p.hp.lr, p.hp.beta1, p.hp.beta2, p.step);
      const std::array<float, 2> host{at.step_size, at.inv_sqrt_bc2};
      LAB_CHECK(cudaMemcpyAsync(coef.data(), host.data(), sizeof(host), cudaMemcpyHostToDevice, stream));
    }
    graph.launch(stream);
  }

  // The QKV rows' buffer: the forward's product output (its bf16 rows with kBias, fp32 otherwise),
  // and in a backward the dQKV rows in fp32. The forward alone with kBias takes half the floats. None
  // where the attention reads the rows as they are (reads_qkv_rows): they lie with the saved tensors.
  static std::size_t qkv_floats(const gpt2::Config& c, gpt2::Phase phase) {
    if (reads_qkv_rows(c)) return 0;  // the rows lie with the saved tensors; dQKV in gy (kGradCopies)
    const std::size_t n = 3 * c.tokens() * c.d;
    if (phase == gpt2::Phase::forward && kBias) return (n * sizeof(Op) + sizeof(float) - 1) / sizeof(float);
    return n;
  }

  // The saved tensors' memory. The forward alone keeps one block's and the head's, in a buffer of
  // their own. With a backward, every block's and the head's are kept, in the gradients' buffer
  // wherever gpt2::plan_saved finds room: the part of it that the backward has not yet written
  // when they are read (a block's saved tensors below the block's own gradients, in those of the
  // blocks before it and the embeddings'). At xl and context 256 that is every block but the first,
  // 4.5 GB the step no longer allocates; what has no room there (the small model at context 1024:
  // most of it) is spilled into a buffer of its own. The backward's kernels then write a block's
  // gradients over the saved tensors of the blocks after it, which they have finished with.
  void place_saved(Gpt2Step::Problem& p) {
    if (phase == gpt2::Phase::forward) {
      // Nothing is kept for a backward: the head's weights' copy and its logits are made after the
      // last block's last pass, so they lie over the block's tensors, and only the final
      // LayerNorm's outputs, which that pass writes while it reads the block's mid and the head's
      // product reads, lie apart: first, the block's tensors and the late part both after them
      // (gpt2::plan_forward_saved). At small, context 1024: 103 MB where both took 200 (121 MB with the
      // LayerNorms' outputs kept, steps 15 on). The logits
      // are made a slice of rows at a time (head_slice_rows): a quarter of them.
      const std::size_t slice = std::size_t(head_slice_rows(c, phase));
      const gpt2::ForwardSaved at = forward_saved<Block, Head>(c, slice);  // saved.cuh
      spill = Buffer(at.floats);
      ForwardCarvers carve = forward_carvers(at, spill.data());
      head = Head(c, carve.kept, carve.late, slice);
      blocks.emplace_back(c, carve.block);
      return;
    }
    std::vector<std::size_t> floats(c.layers + 1, Block::floats(c));
    floats.back() = Head::floats(c);
    const gpt2::SavedPlan plan = gpt2::plan_saved(c, floats);
    spill = Buffer(plan.spill);
    auto at = [&](int stage) {
      const gpt2::SavedPlace& where = plan.stages[stage];
      return (where.in_grads ? p.grads.data() : spill.data()) + where.offset;
    };
    blocks.reserve(c.layers);
    for (int l = 0; l < c.layers; ++l) {
      Carver m{at(l)};
      blocks.emplace_back(c, m);
    }
    Carver m{at(c.layers)};
    head = Head(c, m);
    for (const gpt2::SavedPlace& where : plan.stages) copy_kept.push_back(!where.in_grads);
  }

  // Whether AdamW writes stage l's weights' copy for the next step (kAdamWRounds, the full step):
  // where the copy lies in memory that nothing else of the step writes, the spill buffer. The
  // backward writes its gradients over the saved tensors that lie in the gradients' buffer, the
  // copy among them, so those stages are rounded again at the start of each step.
  bool adamw_rounds(int l) const {
    return kAdamWRounds && phase == gpt2::Phase::step && copy_kept[std::size_t(l)];
  }
  std::size_t stage_end(int l, std::size_t params) const {
    return l == c.layers ? params : gpt2::stage_begin(c, l + 1);
  }
  Op* stage_copy(int l) { return l == c.layers ? head.w : saved(l).w; }

  Block& saved(int l) { return blocks[l % blocks.size()]; }

  // The rows of logits the head makes at a time. A backward reads every row's logits (their
  // gradient takes their place), so with one they are made at once. The forward alone reads a
  // row's logits once, for its loss, so it makes them kHeadSlices slices of rows, each slice's
  // product followed by its loss before the next slice's product writes over it: its peak holds a
  // quarter of them (at small, context 1024, vocabulary 50304: 98 MiB of bf16 logits where all
  // took 393), for three more launches of each kernel, each of a quarter of the rows.
  static constexpr int kHeadSlices = 4;
  static int head_slice_rows(const gpt2::Config& c, gpt2::Phase phase) {
    const int rows = int(c.tokens());
    return phase == gpt2::Phase::forward ? (rows + kHeadSlices - 1) / kHeadSlices : rows;
  }

  // A stage's weights as the products read them: the parameters themselves (fp32), or their copy
  // in Op that the forward made at the start of the stage (`copy`, the stage's parameters from
  // `begin` on). round_weights makes that copy (nothing to do in fp32).
  static constexpr bool kCopies = !std::is_same_v<Op, float>;
  const Op* weight(const float* P, std::size_t at, const Op* copy, std::size_t begin) const {
    if constexpr (kCopies) return copy + (at - begin);
    else return P + at;
  }
  void round_weights(const float* P, std::size_t begin, std::size_t end, Op* copy, cudaStream_t stream) {
    if constexpr (kCopies) {
      const std::size_t n = end - begin;
      if (begin % 4 == 0 && n % 4 == 0 && reinterpret_cast<std::uintptr_t>(copy) % (4 * sizeof(Op)) == 0)
        round_kernel<4><<<blocks_for(n / 4), kThreads, 0, stream>>>(P + begin, copy, n);
      else
        round_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(P + begin, copy, n);
      LAB_CHECK(cudaGetLastError());
    }
  }

  // The head's products: the Products class's own head() (head_bf16() for bf16 logits), or its
  // linear().
  void head_forward(const Op* X, const Op* W, Logit* Y, int m, cudaStream_t stream) {  // m rows
    if constexpr (kLogitsBf16)
      products.head_bf16(blas, X, W, Y, m, c.vocab, d, stream);
    else if constexpr (policy::NamesHead<Products>)
      products.head(blas, X, W, Y, m, c.vocab, d, stream);
    else
      products.linear(blas, X, W, Y, m, c.vocab, d, stream);
  }
  void head_backward(const Grad* dY, const Op* X, const Op* W, float* dX, float* dW, cudaStream_t stream) {
    if constexpr (policy::NamesHeadBackward<Products>)
      products.head_backward(blas, dY, X, W, dX, dW, nullptr, rows, c.vocab, d, stream);
    else
      products.linear_backward(blas, dY, X, W, dX, dW, nullptr, rows, c.vocab, d, stream);
  }

  // The backward of a product whose input is a LayerNorm's output (n columns of dY, k of X): dW into
  // dw, and dX, that LayerNorm's dy, into dln, returned in the type it was written in (LnGrad): in
  // bf16 with kLnGradBf16 (dln's memory holds it), the two products one at a time; else in fp32 by
  // linear_backward (db: as it takes it), or head_backward for the head (db null).
  const LnGrad* ln_grad_backward(const Grad* dY, const Op* X, const Op* W, float* dw, float* db, int n, int k,
                                 bool head_product, cudaStream_t stream) {
    if constexpr (kLnGradBf16) {
      if (db) throw lab::Error("ln_grad_backward: the bias gradient is summed where dY is made");
      LnGrad* const dx_bf = reinterpret_cast<LnGrad*>(dln.data());
      products.linear_dx_bf16(blas, dY, W, dx_bf, rows, n, k, stream);
      products.linear_dw(blas, dY, X, dw, rows, n, k, stream);
      return dx_bf;
    } else {
      if (head_product) head_backward(dY, X, W, dln.data(), dw, stream);
      else products.linear_backward(blas, dY, X, W, dln.data(), dw, db, rows, n, k, stream);
      return dln.data();
    }
  }

  // Where the loss writes the logits' gradient: over the logits (fp32, or bf16 with bf16 dY), or in gy.
  Grad* logits_grad() {
    if constexpr (kLogitsBf16 || !kGradCopies) return head.logits;
    else return gy.data();
  }

  // Where a LayerNorm's output lies: kept with the saved tensors (kKeepLn: `kept`, a block's ln1 or
  // ln2, the head's ln), else in the one buffer ln, which the backward fills again (layer_norm_again).
  Op* ln_at(Op* kept) { return kKeepLn ? kept : ln.data(); }

  // (residual +) LayerNorm rows into ln: see residual_layer_norm_kernel.
  void residual_layer_norm(const float* x, const float* y, const float* bias, float* x_out, const float* w,
                           const float* b, Op* ln, float* mean, float* rstd, cudaStream_t stream) {
    with_items(d, [&](auto items) {
      residual_layer_norm_kernel<decltype(items)::value, Op>
          <<<rows, kThreads, 0, stream>>>(x, y, bias, x_out, w, b, ln, mean, rstd, d);
    });
    LAB_CHECK(cudaGetLastError());
  }
  // ln = LayerNorm(x) again, for the backward: see layer_norm_again_kernel.
  void layer_norm_again(const float* x, const float* mean, const float* rstd, const float* w, const float* b,
                        cudaStream_t stream) {
    ::layer_norm_again(x, mean, rstd, w, b, ln.data(), rows, d, stream);
  }
  // next_dy, next_db: the residual stream's gradient in Grad and its column sums, for the product
  // before the LayerNorm (kGradCopies; null: not written). zeroed: dw, db and next_db are zero
  // already (small_grads_kernel), else they are zeroed here.
  template <class Dy>
  void layer_norm_backward(const Dy* dy, const float* x, const float* w, const float* mean, const float* rstd,
                           float* dres, float* dw, float* db, bool accumulate, cudaStream_t stream,
                           Grad* next_dy = nullptr, float* next_db = nullptr, bool zeroed = false) {
    if (!zeroed) {
      LAB_CHECK(cudaMemsetAsync(dw, 0, d * sizeof(float), stream));
      LAB_CHECK(cudaMemsetAsync(db, 0, d * sizeof(float), stream));
      if (next_db) LAB_CHECK(cudaMemsetAsync(next_db, 0, d * sizeof(float), stream));
    }
    const unsigned grid = static_cast<unsigned>(std::min(rows, 512));  // 8 or more rows a block at scale
    with_vec_items(d, [&](auto items, auto v) {
      layer_norm_backward_kernel<decltype(items)::value, decltype(v)::value, Grad, Dy><<<grid, kThreads, 0, stream>>>(
          dy, x, w, mean, rstd, dres, dw, db, rows, d, accumulate, next_dy, next_db);
    });
    LAB_CHECK(cudaGetLastError());
  }

  // act = gelu(h) over the MLP's B T x 4d pre-activation; in place over h where act has no memory:
  // the forward alone with kBias keeps nothing for a backward, so GELU's output may replace its
  // input (4 d values a token less: 25 MB at small, context 1024).
  static std::size_t act_size(const gpt2::Config& c, gpt2::Phase phase) {
    return phase == gpt2::Phase::forward && kBias ? 0 : 4 * c.tokens() * c.d;
  }
  void gelu(Op* h, cudaStream_t stream) {
    const std::size_t n = c.tokens() * d;  // quads
    const bool in_place = act.size() == 0;
    if (n % 2 == 0) {  // two quads a thread: see gelu_kernel
      if (in_place) gelu_in_place_kernel<2><<<blocks_for(n / 2), kThreads, 0, stream>>>(h, n);
      else gelu_kernel<2><<<blocks_for(n / 2), kThreads, 0, stream>>>(h, act.data(), n);
    } else {
      if (in_place) gelu_in_place_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(h, n);
      else gelu_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(h, act.data(), n);
    }
    LAB_CHECK(cudaGetLastError());
  }
  // Where gelu() put GELU's output of the block's h.
  const Op* gelu_out(const Block& s) const { return act.size() ? act.data() : s.h; }

  // The optimizer overlaps the backward: the backward finishes the gradients a stage at a time (the
  // head's with the final LayerNorm's, then block L-1's down to block 0's, the embeddings' last), and
  // a stage's parameters are read by no later kernel of the step. So AdamW updates each stage on the
  // side stream as soon as its gradients are done, while the lead stream goes on with the blocks
  // below. AdamW is memory-bound and the products are not: at the lowest priority its blocks take
  // what the backward leaves idle (the tails of its waves, its short kernels) instead of a
  // separate pass over 28 bytes a parameter at the end (at xl, 42 GB: 14 ms of the step).
  void step(Gpt2Step::Problem& p, cudaStream_t stream) {
    forward(p, stream);
    if (phase == gpt2::Phase::forward) return;
    const bool update = phase == gpt2::Phase::step;
    backward(p, stream, [&](int stage) {
      if (!update) return;
      wait(side, stream);
      adamw(p, gpt2::stage_begin(c, stage), stage_end(stage, p.params.size()), side,
            adamw_rounds(stage) ? stage_copy(stage) : nullptr);
    });
    if (!update) return;
    adamw(p, 0, gpt2::stage_begin(c, 0), stream);  // the embeddings, whose gradients come last
    wait(stream, side);
  }
  // AdamW over [begin, end); with `copy`, the stage's bf16 copy written from the updated values.
  void adamw(Gpt2Step::Problem& p, std::size_t begin, std::size_t end, cudaStream_t stream, Op* copy = nullptr) {
    __nv_bfloat16* bf16_copy = nullptr;
    if constexpr (std::is_same_v<Op, __nv_bfloat16>) bf16_copy = copy;
    flat_adamw::step(p.params.data(), p.grads.data(), p.m.data(), p.v.data(), begin, end, {.device = coef.data()},
                     flat_adamw::Hyper::of(p.hp.lr, p.hp.beta1, p.hp.beta2, p.hp.eps, p.hp.weight_decay), stream,
                     bf16_copy);
  }

  // With kRoundAhead and a backward (every block's saved tensors, its weights' copy among them, in
  // memory of its own, which nothing else of the step writes before the backward), the copies of
  // every stage are made on the side stream at the start, stage by stage, an event after each; the
  // lead stream waits for stage l's event before block l's first product. The rounding is memory-
  // bound and the products are not: at the side stream's lowest priority, the rounding of the later
  // stages takes what the products of the earlier ones leave idle (as AdamW does in the backward),
  // where the lead stream spent it between them. The forward alone keeps one block's saved tensors,
  // reused by every block (so one copy at a time): it rounds each stage as it comes, as before.
  // A stage whose copy the last step's AdamW wrote (adamw_rounds) is not rounded: its event is null.
  std::vector<cudaEvent_t> round_ahead(const float* P, std::size_t params, cudaStream_t stream) {
    std::vector<cudaEvent_t> rounded;
    if (!kRoundAhead || phase == gpt2::Phase::forward) return rounded;
    wait(side, stream);
    for (int l = 0; l <= c.layers; ++l) {
      if (adamw_rounds(l)) {
        rounded.push_back(nullptr);
        continue;
      }
      round_weights(P, gpt2::stage_begin(c, l), stage_end(l, params), stage_copy(l), side);
      forks.emplace_back().record(side);
      rounded.push_back(forks.back());
    }
    return rounded;
  }
  // Stage l's copy: waited for (made ahead), ready (written by the last step's AdamW), else made
  // here on the lead stream.
  void stage_weights(const std::vector<cudaEvent_t>& rounded, int l, const float* P, std::size_t begin,
                     std::size_t end, Op* copy, cudaStream_t stream) {
    if (rounded.empty()) round_weights(P, begin, end, copy, stream);
    else if (rounded[l]) LAB_CHECK(cudaStreamWaitEvent(stream, rounded[l]));
  }

  void forward(Gpt2Step::Problem& p, cudaStream_t stream) {
    const float* P = p.params.data();
    const std::vector<cudaEvent_t> rounded = round_ahead(P, p.params.size(), stream);
    Block& s0 = saved(0);
    ops::embedding(P + off.wte, p.tokens.data(), s0.x, rows, d, stream);
    ops::add_positions(s0.x, P + off.wpe, c.batch, c.context, d, stream);
    const gpt2::BlockOffsets& b0 = off.blocks[0];
    residual_layer_norm(s0.x, nullptr, nullptr, s0.x, P + b0.ln1_w, P + b0.ln1_b, ln_at(s0.ln1),
                        s0.mean1, s0.rstd1, stream);
    const std::size_t n = c.tokens() * d;
    const std::size_t nh = heads_size(c);  // Q, K, V, O by head (padded)
    for (int l = 0; l < c.layers; ++l) {
      const gpt2::BlockOffsets& ob = off.blocks[l];
      Block& s = saved(l);
      const std::size_t at = gpt2::stage_begin(c, l);
      auto W = [&](std::size_t offset) { return weight(P, offset, s.w, at); };
      stage_weights(rounded, l, P, at, gpt2::stage_begin(c, l + 1), s.w, stream);
      // Attention: the QKV product, its bias while laying Q, K, V out by head (or in the product's
      // epilogue, kBias: the rows in bf16, laid out alone), flash attention.
      auto qkv_heads = [&](const auto* src, const float* bias) {
        if (hd % 4 == 0)  // four elements a thread: see qkv_heads_kernel
          qkv_heads_kernel<4><<<blocks_for(nh / 4), kThreads, 0, stream>>>(src, bias, s.q, s.k, s.v, nh, c.context,
                                                                           c.heads, hd, dp);
        else
          qkv_heads_kernel<1><<<blocks_for(nh), kThreads, 0, stream>>>(src, bias, s.q, s.k, s.v, nh, c.context,
                                                                       c.heads, hd, dp);
        LAB_CHECK(cudaGetLastError());
      };
      const bool qkv_rows = reads_qkv_rows(c);  // the rows where Q, K and V are saved, read as they are
      if constexpr (kBias) {
        Op* const rows_bf = reinterpret_cast<Op*>(qkv_rows ? static_cast<void*>(s.q) : qkv.data());
        products.linear_bias(blas, ln_at(s.ln1), W(ob.qkv_w), W(ob.qkv_b), rows_bf, rows, 3 * d, d, stream);
        if (!qkv_rows) qkv_heads(rows_bf, nullptr);
      } else {
        products.linear(blas, ln_at(s.ln1), W(ob.qkv_w), qkv.data(), rows, 3 * d, d, stream);
        qkv_heads(qkv.data(), P + ob.qkv_b);
      }
      if constexpr (kQkvRows) {  // Q, K and V from the product's rows, O straight into the merged rows
        if (qkv_rows)
          attention.forward_qkv_rows(s.q, s.att, s.lse, c.batch, c.heads, c.context, hd, true,
                                     1.f / std::sqrt(float(hd)), stream);
        else
          attention.forward_rows(s.q, s.k, s.v, s.att, s.lse, c.batch, c.heads, c.context, dp, hd, true,
                                 1.f / std::sqrt(float(hd)), stream);
      } else if constexpr (kRows) {  // O straight into the merged rows
        attention.forward_rows(s.q, s.k, s.v, s.att, s.lse, c.batch, c.heads, c.context, dp, hd, true,
                               1.f / std::sqrt(float(hd)), stream);
      } else {
        attention.forward(s.q, s.k, s.v, o.data(), s.lse, c.batch * c.heads, c.context, dp, true,
                          1.f / std::sqrt(float(hd)), stream);
        merge_heads_kernel<<<blocks_for(nh), kThreads, 0, stream>>>(o.data(), s.att, nh, c.context, c.heads, hd, dp);
        LAB_CHECK(cudaGetLastError());
      }
      // The projection; its bias, the residual and LayerNorm 2 in one pass.
      products.linear(blas, s.att, W(ob.proj_w), tmp.data(), rows, d, d, stream);
      residual_layer_norm(s.x, tmp.data(), P + ob.proj_b, s.mid, P + ob.ln2_w, P + ob.ln2_b,
                          ln_at(s.ln2), s.mean2, s.rstd2, stream);
      // The MLP: its bias and GELU in one pass; the second bias, the residual and the next
      // LayerNorm (the next block's first, or the final one) in one pass.
      // The first product writes fp32: into h itself in fp32, else into scratch that the pass rounds.
      // With kBias its epilogue writes h in bf16, bias added, and the pass makes GELU alone.
      if constexpr (kBias) {
        // kGeluForwardInProduct: one launch makes h and act (act over h where act has no memory).
        bool in_product = false;
        if constexpr (kGeluForwardInProduct) {
          Op* const h_kept = act.size() ? s.h : nullptr;
          Op* const act_at = act.size() ? act.data() : s.h;
          in_product = dgelu_product::bias_gelu_fits(ln_at(s.ln2), W(ob.fc_w), W(ob.fc_b), h_kept, act_at, rows, d, 4 * d);
          if (in_product)
            dgelu_product::bias_gelu(ln_at(s.ln2), W(ob.fc_w), W(ob.fc_b), h_kept, act_at, rows, d, 4 * d, stream);
        }
        if (!in_product) {
          products.linear_bias(blas, ln_at(s.ln2), W(ob.fc_w), W(ob.fc_b), s.h, rows, 4 * d, d, stream);
          gelu(s.h, stream);
        }
      } else {
        float* y = kCopies ? wide.data() : reinterpret_cast<float*>(s.h);
        products.linear(blas, ln_at(s.ln2), W(ob.fc_w), y, rows, 4 * d, d, stream);
        bias_gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, P + ob.fc_b, s.h, act.data(), n,
                                                                 d);  // 4n values: n quads, d a row
        LAB_CHECK(cudaGetLastError());
      }
      products.linear(blas, gelu_out(s), W(ob.fc2_w), tmp.data(), rows, d, 4 * d, stream);
      if (l + 1 < c.layers) {
        Block& next = saved(l + 1);
        const gpt2::BlockOffsets& on = off.blocks[l + 1];
        residual_layer_norm(s.mid, tmp.data(), P + ob.fc2_b, next.x, P + on.ln1_w, P + on.ln1_b,
                            ln_at(next.ln1), next.mean1, next.rstd1, stream);
      } else {
        residual_layer_norm(s.mid, tmp.data(), P + ob.fc2_b, head.out, P + off.lnf_w, P + off.lnf_b,
                            ln_at(head.ln), head.meanf, head.rstdf, stream);
      }
    }
    // The head, and the loss (with its gradient when there is a backward) in one pass a row (the
    // row held in registers where the vocabulary allows: cross_entropy_rows_kernel, and
    // cross_entropy_pairs_kernel for longer rows of bf16 logits); a slice of rows at a time in the
    // forward alone (head_slice_rows).
    const std::size_t head_at = gpt2::stage_begin(c, c.layers);
    stage_weights(rounded, c.layers, P, head_at, p.params.size(), head.w, stream);
    const Op* const head_w = weight(P, off.head, head.w, head_at);
    const float inv_rows = 1.f / float(rows);
    // The logits' gradient in Grad: in place (fp32 logits and dY, or both bf16), else into gy for the
    // head's backward.
    Grad* const dz = phase == gpt2::Phase::forward ? nullptr : logits_grad();
    // The loss of rows r0 to r0 + m - 1, whose logits lie at head.logits.
    auto loss = [&](auto backward, int r0, int m) {
      constexpr bool kBackward = decltype(backward)::value;
      const int v = c.vocab;
      const std::int32_t* targets = p.targets.data() + r0;
      float* row_losses = losses.data() + r0;
      auto rows_kernel = [&](auto items) {  // the row in registers: see cross_entropy_rows_kernel
        cross_entropy_rows_kernel<decltype(items)::value, kBackward, Grad, Logit>
            <<<m, kRowThreads, 0, stream>>>(head.logits, targets, row_losses, v, inv_rows, dz);
      };
      // Past that, bf16 logits still fit two a register (cross_entropy_pairs_kernel, to 57344).
      auto pairs_kernel = [&](auto pairs) {
        if constexpr (kLogitsBf16)
          cross_entropy_pairs_kernel<decltype(pairs)::value, kBackward>
              <<<m, kRowThreads, 0, stream>>>(head.logits, targets, row_losses, v, inv_rows, dz);
      };
      // With kLossInFlight, 16-byte loads and 256 threads a row first (cross_entropy_vecs_kernel).
      auto vecs_kernel = [&](auto vecs) {
        if constexpr (kLogitsBf16 && kLossInFlight)
          cross_entropy_vecs_kernel<decltype(vecs)::value, kBackward>
              <<<m, kVecRowThreads, 0, stream>>>(head.logits, targets, row_losses, v, inv_rows, dz);
      };
      const bool in_vecs = kLossInFlight && with_row_vecs(v, head.logits, vecs_kernel);
      if (!in_vecs && !with_row_items(v, rows_kernel) && !(kLogitsBf16 && with_row_pairs(v, pairs_kernel)))
        cross_entropy_kernel<kBackward, Grad, Logit>
            <<<m, kThreads, 0, stream>>>(head.logits, targets, row_losses, v, inv_rows, dz);
      LAB_CHECK(cudaGetLastError());
    };
    if (phase == gpt2::Phase::forward) {
      const int slice = head_slice_rows(c, phase);
      for (int r0 = 0; r0 < rows; r0 += slice) {
        const int m = std::min(slice, rows - r0);
        head_forward(ln_at(head.ln) + std::size_t(r0) * d, head_w, head.logits, m, stream);
        loss(std::false_type{}, r0, m);
      }
    } else {
      head_forward(ln_at(head.ln), head_w, head.logits, rows, stream);
      loss(std::true_type{}, 0, rows);
    }
    mean_kernel<<<1, kThreads, 0, stream>>>(losses.data(), p.loss.data(), rows);
    LAB_CHECK(cudaGetLastError());
  }

  // done(stage) is called once a stage's gradients are final (stage L: the head and the final
  // LayerNorm; l < L: block l), in the order the backward finishes them.
  //
  // Each product's dY: the fp32 tensor itself, or (kGradCopies) its copy in Grad that the kernel
  // making it wrote into gy, with the product's bias gradient summed there too (linear_backward
  // gets db null): the LayerNorms' backward for the residual stream's gradient (dY of the
  // projection and of the MLP's second product), GELU's backward (the first product's), the QKV
  // rows (the QKV product's), the loss (the head's). The MLP's second bias gradient is summed by
  // the LayerNorm backward of the stage above (the next block's first, or the final one) into
  // carry_db and moved into place when the block's backward starts (small_grads_kernel, which also
  // zeroes the block's other small gradients that kernels add into): the stage above's saved
  // tensors may lie in this block's part of the gradients' buffer (place_saved) until then.
  template <class Done>
  void backward(Gpt2Step::Problem& p, cudaStream_t stream, Done done) {
    const float* P = p.params.data();
    float* G = p.grads.data();
    const std::size_t n = c.tokens() * d;
    const std::size_t nh = heads_size(c);  // Q, K, V, O by head (padded)
    float* dact = wide.data();        // the MLP's output gradient, then (in place) its pre-activation's
    float *dq = wide.data(), *dk = dq + nh, *dv = dk + nh;  // the attention's, once dact is done with
    float* dqkv = qkv.data();         // the forward's QKV rows, free in the backward
    auto dy_of = [&](float* fp32) -> const Grad* {
      if constexpr (kGradCopies) return gy.data();
      else return fp32;
    };
    auto db_of = [&](float* db) { return kGradCopies ? nullptr : db; };
    Grad* const next = kGradCopies ? gy.data() : nullptr;
    float* const carry = kGradCopies ? carry_db.data() : nullptr;
    // The logits hold dloss/dlogits (the cross-entropy kernel wrote it; in Grad: over bf16 logits,
    // else in gy).
    if constexpr (!kKeepLn)
      layer_norm_again(head.out, head.meanf, head.rstdf, P + off.lnf_w, P + off.lnf_b, stream);
    const LnGrad* dlnf =
        ln_grad_backward(logits_grad(), ln_at(head.ln), weight(P, off.head, head.w, gpt2::stage_begin(c, c.layers)),
                         G + off.head, nullptr, c.vocab, d, true, stream);
    layer_norm_backward(dlnf, head.out, P + off.lnf_w, head.meanf, head.rstdf, dx.data(), G + off.lnf_w, G + off.lnf_b,
                        false, stream, next, carry);
    done(c.layers);
    for (int l = c.layers - 1; l >= 0; --l) {
      const gpt2::BlockOffsets& ob = off.blocks[l];
      const Block& s = saved(l);
      auto W = [&, at = gpt2::stage_begin(c, l)](std::size_t offset) { return weight(P, offset, s.w, at); };
      if constexpr (kGradCopies) {  // the block's small gradients zeroed, the MLP's second bias into place
        SmallGrads g{};
        const std::size_t parts[SmallGrads::kParts] = {ob.ln1_w, ob.ln1_b, ob.qkv_b, ob.proj_b,
                                                       ob.ln2_w, ob.ln2_b, ob.fc_b};
        const int counts[SmallGrads::kParts] = {d, d, 3 * d, d, d, d, 4 * d};
        for (int t = 0; t < SmallGrads::kParts; ++t) g.zero[t] = G + parts[t], g.count[t] = counts[t];
        g.carry = carry, g.fc2_b = G + ob.fc2_b, g.d = d;
        small_grads_kernel<<<blocks_for(4 * std::size_t(d)), kThreads, 0, stream>>>(g);
        LAB_CHECK(cudaGetLastError());
      }
      // The MLP: GELU's output made again from the pre-activation, the second product's backward,
      // GELU's backward in place, the first product's. With kGeluOnce: the second product's dX,
      // GELU's backward making GELU's output too, the second product's dW, the first product's.
      const Grad* mlp_dy = dy_of(dact);  // the first product's dY, dh (kGeluOnce: in dact's place)
      if constexpr (kGeluOnce) {
        Grad* const dact_bf = reinterpret_cast<Grad*>(dact);
        // kGeluInProduct: one launch makes dh (over dact's place), act and the first bias's gradient.
        bool in_product = false;
        if constexpr (kGeluInProduct) {
          in_product = dgelu_product::dx_dgelu_fits(dy_of(dx.data()), W(ob.fc2_w), s.h, dact_bf, act.data(), rows, d,
                                                    4 * d);
          if (in_product)
            dgelu_product::dx_dgelu(dy_of(dx.data()), W(ob.fc2_w), s.h, dact_bf, act.data(), G + ob.fc_b, rows, d,
                                    4 * d, stream);
        }
        if (!in_product) {
          products.linear_dx_bf16(blas, dy_of(dx.data()), W(ob.fc2_w), dact_bf, rows, d, 4 * d, stream);
          if constexpr (kGeluInFlight) {
            gelu_backward_act_in_flight(dact_bf, s.h, act.data(), G + ob.fc_b, rows, 4 * d, stream);
          } else {
            gelu_backward_act_kernel<Op, Grad><<<column_owner_grid(rows, d), kThreads, 0, stream>>>(
                dact_bf, s.h, act.data(), G + ob.fc_b, rows, d);
            LAB_CHECK(cudaGetLastError());
          }
        }
        products.linear_dw(blas, dy_of(dx.data()), act.data(), G + ob.fc2_w, rows, d, 4 * d, stream);
        mlp_dy = dact_bf;
      } else if constexpr (kDact) {  // GELU's output gradient in bf16, read so by GELU's backward
        gelu(s.h, stream);
        Grad* const dact_bf = reinterpret_cast<Grad*>(dact);
        products.linear_backward_bf16(blas, dy_of(dx.data()), act.data(), W(ob.fc2_w), dact_bf, G + ob.fc2_w, rows,
                                      d, 4 * d, stream);
        gelu_backward_sum_kernel<Op, Grad><<<column_owner_grid(rows, d), kThreads, 0, stream>>>(
            dact_bf, s.h, next, G + ob.fc_b, rows, d);
      } else {
        gelu(s.h, stream);
        products.linear_backward(blas, dy_of(dx.data()), act.data(), W(ob.fc2_w), dact, G + ob.fc2_w,
                                 db_of(G + ob.fc2_b), rows, d, 4 * d, stream);
        if constexpr (kGradCopies)
          gelu_backward_sum_kernel<Op, Grad><<<column_owner_grid(rows, d), kThreads, 0, stream>>>(dact, s.h, next,
                                                                                                 G + ob.fc_b, rows, d);
        else
          gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<float4*>(dact), s.h, n);
      }
      LAB_CHECK(cudaGetLastError());
      if constexpr (!kKeepLn) layer_norm_again(s.mid, s.mean2, s.rstd2, P + ob.ln2_w, P + ob.ln2_b, stream);
      const LnGrad* dln2 =
          ln_grad_backward(mlp_dy, ln_at(s.ln2), W(ob.fc_w), G + ob.fc_w, db_of(G + ob.fc_b), 4 * d, d, false, stream);
      layer_norm_backward(dln2, s.mid, P + ob.ln2_w, s.mean2, s.rstd2, dx.data(), G + ob.ln2_w, G + ob.ln2_b, true,
                          stream, next, kGradCopies ? G + ob.proj_b : nullptr, kGradCopies);
      // The attention: dO by head with delta, the flash backward, dQ dK dV back into rows.
      products.linear_backward(blas, dy_of(dx.data()), s.att, W(ob.proj_w), dln.data(), G + ob.proj_w,
                               db_of(G + ob.proj_b), rows, d, d, stream);
      const std::size_t head_rows = c.tokens() * c.heads;
      if (hd % 4 == 0)  // four columns a thread, dp / 4 threads a head row: see dout_heads4_kernel
        dout_heads4_kernel<<<static_cast<unsigned>(lab::ceil_div(head_rows * (dp / 4), kThreads)), kThreads, 0,
                             stream>>>(dln.data(), s.att, dout.data(), delta.data(), head_rows, c.context, c.heads, hd,
                                       dp);
      else
        dout_heads_kernel<<<static_cast<unsigned>(lab::ceil_div(head_rows * 32, kThreads)), kThreads, 0, stream>>>(
            dln.data(), s.att, dout.data(), delta.data(), head_rows, c.context, c.heads, hd, dp);
      LAB_CHECK(cudaGetLastError());
      LAB_CHECK(cudaMemsetAsync(dq, 0, nh * sizeof(float), stream));
      if constexpr (kQkvRows) {  // as kRows's, Q, K and V read from the rows the forward saved
        if (reads_qkv_rows(c))
          attention.backward_qkv_rows(s.q, dout.data(), s.lse, delta.data(), dq, next, G + ob.qkv_b, c.batch, c.heads,
                                      c.context, hd, true, 1.f / std::sqrt(float(hd)), stream);
        else
          attention.backward_rows(s.q, s.k, s.v, dout.data(), s.lse, delta.data(), dq, next, G + ob.qkv_b, c.batch,
                                  c.heads, c.context, dp, hd, true, 1.f / std::sqrt(float(hd)), stream);
      } else if constexpr (kRows) {  // dK and dV straight into dQKV's rows, with their bias gradients; dQ by head
        attention.backward_rows(s.q, s.k, s.v, dout.data(), s.lse, delta.data(), dq, next, G + ob.qkv_b, c.batch,
                                c.heads, c.context, dp, hd, true, 1.f / std::sqrt(float(hd)), stream);
      } else {
        attention.backward(s.q, s.k, s.v, dout.data(), s.lse, delta.data(), dq, dk, dv, c.batch * c.heads, c.context,
                           dp, true, 1.f / std::sqrt(float(hd)), stream);
      }
      if constexpr (kGradCopies) {  // dQ, dK, dV into rows (with kRows: dQ's alone)
        qkv_rows_sum_kernel<Grad><<<column_owner_grid(rows, kRows ? d : 3 * d), kThreads, 0, stream>>>(
            dq, dk, dv, next, G + ob.qkv_b, rows, c.context, c.heads, hd, dp, 0, kRows ? 1 : 3);
      } else {
        qkv_rows_kernel<<<blocks_for(nh), kThreads, 0, stream>>>(dq, dk, dv, dqkv, nh, c.context, c.heads, hd, dp);
      }
      LAB_CHECK(cudaGetLastError());
      if constexpr (!kKeepLn) layer_norm_again(s.x, s.mean1, s.rstd1, P + ob.ln1_w, P + ob.ln1_b, stream);
      const LnGrad* dln1 = ln_grad_backward(dy_of(dqkv), ln_at(s.ln1), W(ob.qkv_w), G + ob.qkv_w,
                                            db_of(G + ob.qkv_b), 3 * d, d, false, stream);
      // The residual stream's gradient is the embeddings' (block 0) or the block below's dY.
      layer_norm_backward(dln1, s.x, P + ob.ln1_w, s.mean1, s.rstd1, dx.data(), G + ob.ln1_w, G + ob.ln1_b, true,
                          stream, l > 0 ? next : nullptr, l > 0 ? carry : nullptr, kGradCopies);
      done(l);
    }
    ops::embedding_backward(dx.data(), p.tokens.data(), G + off.wte, rows, c.vocab, d, stream);
    ops::positions_backward(dx.data(), G + off.wpe, c.batch, c.context, d, stream);
  }
};

}  // namespace

