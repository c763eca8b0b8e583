// The chapter 3 operators of the bridge: a registered variant run on the caller's memory (see
// bridge.hpp). The variants compiled in (sources.txt) have prepare steps that depend on the shape
// alone (scratch sized from it, nothing read from the inputs): the state prepared for one call is
// right for every later call of the same shape, which is what the cache below relies on.
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

#include "activations.cuh"
#include "bridge.hpp"
#include "lab/device.hpp"
#include "layernorm.cuh"
#include "losses.cuh"
#include "weighted_sum.cuh"

namespace bridge {
namespace {

// One variant's state for one shape on one device: the borrowed problem and the prepared instance.
struct State {
  std::mutex lock;  // one call at a time re-points the problem's buffers and launches
  std::unique_ptr<lab::Problem> problem;
  std::unique_ptr<lab::Instance> instance;
};

struct Cache {
  std::mutex lock;
  std::map<std::tuple<std::string, std::vector<std::int64_t>, int>, std::unique_ptr<State>> states;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: no CUDA frees after the driver has shut down
  return *c;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// Runs `program`, a variant of Topic, on `shape`: bind(problem) points the problem's buffers at the
// caller's memory before every run (and before the prepare step, which may read sizes from them).
template <class Topic, class Bind>
void run(const std::string& program, const lab::Shape& shape, cudaStream_t stream, Bind&& bind) {
  const lab::Variant* v = lab::Registry::global().find(program);
  if (!v || v->topic->name != std::string(Topic::name))
    throw std::invalid_argument("no variant '" + program + "' of " + Topic::name + " in the extension; it has: " +
                                joined(variants_of(Topic::name)));
  if (const std::string why = v->topic->validate(shape); !why.empty())
    throw std::invalid_argument(std::string(Topic::name) + " " + shape.str() + ": " + why);
  int device = 0;
  LAB_CHECK(cudaGetDevice(&device));
  State* state = nullptr;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> g(c.lock);
    auto& slot = c.states[{program, shape.dims, device}];
    if (!slot) {
      if (const std::string why = v->supports(shape, lab::current_device()); !why.empty())
        throw std::invalid_argument(program + " does not run " + shape.str() + ": " + why);
      slot = std::make_unique<State>();
    }
    state = slot.get();
  }
  std::lock_guard<std::mutex> g(state->lock);
  if (!state->problem) {
    auto problem = std::make_unique<typename Topic::Problem>(shape, lab::Borrowed{});
    bind(*problem);
    state->instance = v->prepare(*problem, stream);
    state->problem = std::move(problem);
  }
  auto& p = static_cast<typename Topic::Problem&>(*state->problem);
  bind(p);
  state->instance->run(p, stream);
}

template <class T>
lab::DeviceBuffer<T> view(const T* p, std::size_t n) {
  return lab::DeviceBuffer<T>::borrow(const_cast<T*>(p), n);  // the variant only reads its inputs
}

}  // namespace

std::vector<std::string> variants_of(const std::string& topic) {
  std::vector<std::string> names;
  for (const lab::Variant* v : lab::Registry::global().of_topic(topic)) names.push_back(v->program);
  return names;
}

void clear_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.lock);
  c.states.clear();
}

std::string supports(const std::string& program, const std::vector<std::int64_t>& dims) {
  const lab::Variant* v = lab::Registry::global().find(program);
  if (!v) return "no variant '" + program + "' in the extension";
  const lab::Shape shape(dims);
  if (std::string why = v->topic->validate(shape); !why.empty()) return why;
  return v->supports(shape, lab::current_device());
}

std::size_t cached_states() {
  Cache& c = cache();
  std::lock_guard<std::mutex> g(c.lock);
  return c.states.size();
}

namespace {
template <class Topic>
void layernorm_rows(const std::string& program, std::int64_t rows, std::int64_t dim, const void* x,
                    const void* gamma, const void* beta, void* y, float* mean, float* rstd, cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().x.data())>;
  const std::size_t n = std::size_t(rows) * dim;
  run<Topic>(program, lab::Shape{rows, dim}, s, [&](typename Topic::Problem& p) {
    p.x = view(static_cast<const T*>(x), n), p.gamma = view(static_cast<const T*>(gamma), dim);
    p.beta = view(static_cast<const T*>(beta), dim), p.y = view(static_cast<T*>(y), n);
    p.mean = view(mean, rows), p.rstd = view(rstd, rows);
  });
}
}  // namespace

const char* suffix(Storage storage) {
  return storage == Storage::bf16 ? "_bf16" : storage == Storage::fp16 ? "_fp16" : "";
}

namespace {
// f(topic) with the topic on the given storage: Of<float>, Of<__nv_bfloat16> or Of<__half>.
template <template <class> class Of, class F>
decltype(auto) on_storage(Storage storage, F&& f) {
  if (storage == Storage::bf16) return f(std::type_identity<Of<__nv_bfloat16>>{});
  if (storage == Storage::fp16) return f(std::type_identity<Of<__half>>{});
  return f(std::type_identity<Of<float>>{});
}
}  // namespace

void layernorm_forward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t dim,
                       const void* x, const void* gamma, const void* beta, void* y, float* mean, float* rstd,
                       cudaStream_t s) {
  on_storage<LayerNormOf>(storage, [&](auto topic) {
    layernorm_rows<typename decltype(topic)::type>(variant + suffix(storage), rows, dim, x, gamma, beta, y, mean,
                                                   rstd, s);
  });
}

namespace {
template <class Topic>
void layernorm_backward_rows(const std::string& program, std::int64_t rows, std::int64_t dim, const void* x,
                             const void* gamma, const void* dy, const float* mean, const float* rstd, void* dx,
                             void* dgamma, void* dbeta, cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().x.data())>;
  const std::size_t n = std::size_t(rows) * dim;
  run<Topic>(program, lab::Shape{rows, dim}, s, [&](typename Topic::Problem& p) {
    p.x = view(static_cast<const T*>(x), n), p.gamma = view(static_cast<const T*>(gamma), dim);
    p.dy = view(static_cast<const T*>(dy), n), p.mean = view(mean, rows), p.rstd = view(rstd, rows);
    p.dx = view(static_cast<T*>(dx), n), p.dgamma = view(static_cast<T*>(dgamma), dim);
    p.dbeta = view(static_cast<T*>(dbeta), dim);
  });
}
}  // namespace

void layernorm_backward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t dim,
                        const void* x, const void* gamma, const void* dy, const float* mean, const float* rstd,
                        void* dx, void* dgamma, void* dbeta, cudaStream_t s) {
  on_storage<LayerNormBackwardOf>(storage, [&](auto topic) {
    layernorm_backward_rows<typename decltype(topic)::type>(variant + suffix(storage), rows, dim, x, gamma, dy, mean,
                                                            rstd, dx, dgamma, dbeta, s);
  });
}

namespace {
template <class Topic>
void unary(const std::string& variant, std::int64_t n, const void* x, void* y, cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().x.data())>;
  run<Topic>(variant, lab::Shape{n}, s, [&](typename Topic::Problem& p) {
    p.x = view(static_cast<const T*>(x), n), p.y = view(static_cast<T*>(y), n);
  });
}
template <class Topic>
void binary(const std::string& variant, std::int64_t n, const void* x, const void* dy, void* dx, cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().x.data())>;
  run<Topic>(variant, lab::Shape{n}, s, [&](typename Topic::Problem& p) {
    p.x = view(static_cast<const T*>(x), n), p.dy = view(static_cast<const T*>(dy), n);
    p.dx = view(static_cast<T*>(dx), n);
  });
}
}  // namespace

namespace {
template <class T>
using GeluOf = Activation<act::GeluOp, T>;
template <class T>
using SwishOf = Activation<act::SwishOp, T>;
template <class T>
using GeluBackwardOf = ActivationBackward<act::GeluOp, T>;
template <class T>
using SwishBackwardOf = ActivationBackward<act::SwishOp, T>;
}  // namespace

void activation_forward(const std::string& topic, const std::string& variant, Storage storage, std::int64_t n,
                        const void* x, void* y, cudaStream_t s) {
  const std::string program = variant + suffix(storage);
  const auto go = [&](auto t) { unary<typename decltype(t)::type>(program, n, x, y, s); };
  if (topic == Gelu::name) return on_storage<GeluOf>(storage, go);
  if (topic == Swish::name) return on_storage<SwishOf>(storage, go);
  throw std::invalid_argument("no activation '" + topic + "' (gelu, swish)");
}

void activation_backward(const std::string& topic, const std::string& variant, Storage storage, std::int64_t n,
                         const void* x, const void* dy, void* dx, cudaStream_t s) {
  const std::string program = variant + suffix(storage);
  const auto go = [&](auto t) { binary<typename decltype(t)::type>(program, n, x, dy, dx, s); };
  if (topic == Gelu::name) return on_storage<GeluBackwardOf>(storage, go);
  if (topic == Swish::name) return on_storage<SwishBackwardOf>(storage, go);
  throw std::invalid_argument("no activation '" + topic + "' (gelu, swish)");
}

namespace {
template <class Topic>
void ce_forward(const std::string& program, std::int64_t rows, std::int64_t classes, const void* logits,
                const std::int32_t* labels, std::int32_t ignore_index, float* loss, float* count, float* lse,
                cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().logits.data())>;
  const lab::Variant* v = lab::Registry::global().find(program);
  if (v && !v->declared.writes_output("lse"))
    throw std::invalid_argument(program + " does not write each row's lse, which the backward needs");
  run<Topic>(program, lab::Shape{rows, classes}, s, [&](typename Topic::Problem& p) {
    p.ignore_index = ignore_index;
    p.logits = view(static_cast<const T*>(logits), std::size_t(rows) * classes), p.labels = view(labels, rows);
    p.loss = view(loss, 1), p.count = view(count, 1), p.lse = view(lse, rows);
  });
}
template <class Topic>
void ce_backward(const std::string& program, std::int64_t rows, std::int64_t classes, const void* logits,
                 const std::int32_t* labels, std::int32_t ignore_index, const float* lse, const float* dloss,
                 const float* count, void* dlogits, cudaStream_t s) {
  using T = std::remove_reference_t<decltype(*std::declval<typename Topic::Problem>().logits.data())>;
  const std::size_t n = std::size_t(rows) * classes;
  run<Topic>(program, lab::Shape{rows, classes}, s, [&](typename Topic::Problem& p) {
    p.ignore_index = ignore_index;
    p.logits = view(static_cast<const T*>(logits), n), p.labels = view(labels, rows), p.lse = view(lse, rows);
    p.dloss = view(dloss, 1), p.count = view(count, 1), p.dlogits = view(static_cast<T*>(dlogits), n);
  });
}
}  // namespace

void cross_entropy_forward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t classes,
                           const void* logits, const std::int32_t* labels, std::int32_t ignore_index, float* loss,
                           float* count, float* lse, cudaStream_t s) {
  on_storage<CrossEntropyOf>(storage, [&](auto topic) {
    ce_forward<typename decltype(topic)::type>(variant + suffix(storage), rows, classes, logits, labels, ignore_index,
                                               loss, count, lse, s);
  });
}
void cross_entropy_backward(const std::string& variant, Storage storage, std::int64_t rows, std::int64_t classes,
                            const void* logits, const std::int32_t* labels, std::int32_t ignore_index, const float* lse,
                            const float* dloss, const float* count, void* dlogits, cudaStream_t s) {
  on_storage<CrossEntropyBackwardOf>(storage, [&](auto topic) {
    ce_backward<typename decltype(topic)::type>(variant + suffix(storage), rows, classes, logits, labels,
                                                ignore_index, lse, dloss, count, dlogits, s);
  });
}

void weighted_sum_forward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                          const float* w, float* y, cudaStream_t s) {
  run<WeightedSum>(variant, lab::Shape{rows, dim}, s, [&](WeightedSum::Problem& p) {
    p.x = view(x, std::size_t(rows) * dim), p.w = view(w, dim), p.y = view(y, rows);
  });
}

void weighted_sum_backward(const std::string& variant, std::int64_t rows, std::int64_t dim, const float* x,
                           const float* w, const float* dy, float* dx, float* dw, cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * dim;
  run<WeightedSumBackward>(variant, lab::Shape{rows, dim}, s, [&](WeightedSumBackward::Problem& p) {
    p.x = view(x, n), p.w = view(w, dim), p.dy = view(dy, rows);
    p.dx = view(dx, n), p.dw = view(dw, dim);
  });
}

}  // namespace bridge
