// The parameter arena: values, gradients and optimizer slots in one block (nn/model/parameters.h).
#include "nn/model/parameters.h"

#include <algorithm>

#include "backends/optimizers/visit.h"
#include "core/aligned.h"
#include "core/error.h"
#include "nn/initializers.h"

namespace crossover {

void check_fits(const Backend& backend, const std::string& model, double bytes,
                const std::string& what, const std::string& advice) {
  const MemoryAvailable a = backend.available_memory();
  if (bytes <= static_cast<double>(a.bytes)) return;
  throw Error(model, what + " need " + bytes_to_string(bytes) + " of " + backend.device_name() +
                         " memory, but " + bytes_to_string(static_cast<double>(a.bytes)) +
                         " are available (" + a.source + ")" + advice);
}

double float_bytes(int64_t n) {
  return static_cast<double>(std::max<int64_t>(n, 16)) * sizeof(float);
}

float* ParameterArena::slot(const LayerParam& p, int k) const {
  if (k == 3 && !slot3) return nullptr;
  return data() + floats * (1 + k) + p.offset;
}

int64_t ParameterArena::count() const {
  int64_t n = 0;
  for (const LayerParam& p : params) n += p.n;
  return n;
}

int64_t ParameterArena::trainable_count(const std::vector<Layer>& layers) const {
  int64_t n = 0;
  for (const LayerParam& p : params)
    if (p.trainable && layers[static_cast<std::size_t>(p.layer)].trainable) n += p.n;
  return n;
}

bool ParameterArena::updates(const LayerParam& p, const std::vector<char>& trains) {
  return p.trainable && trains[static_cast<std::size_t>(p.layer)] != 0;
}

void ParameterArena::reset() {
  block.reset();
  call_grads.reset();
}

void ParameterArena::allocate(Backend& backend, const ModelGraph& graph,
                              const std::vector<char>& trains, const OptimizerConfig& optimizer) {
  block.reset();
  slot3 = optimizer_third_slot(optimizer);
  const int blocks = 2 + state_slots();
  const double bytes = blocks * float_bytes(floats);
  check_fits(backend, graph.name, bytes,
             "the parameters, their gradients and the optimizer's state (" +
                 std::to_string(count()) + " parameters, " + std::to_string(blocks) +
                 " floats each)",
             ": use fewer or smaller layers");
  block = DeviceBlock(backend, static_cast<std::size_t>(bytes));
  if (const float first = initial_slot_value(optimizer); first != 0.0f)  // Adagrad's
    backend.fill(data() + 2 * floats, first, floats);
  slots.clear();
  trainable_slots.clear();
  unfused_slots.clear();
  for (const LayerParam& p : params) {
    slots.push_back(
        {value(p), grad(p), slot(p, 1), slot(p, 2), p.n, p.shape.size() > 1, slot(p, 3)});
    if (!updates(p, trains)) continue;  // moving statistics, frozen layers
    trainable_slots.push_back(slots.back());
    // A shared layer's gradient is the sum over its calls: updated once, after them all.
    const auto l = static_cast<std::size_t>(p.layer);
    if (!layer_kind(graph.layers[l]).fuses_weight_update() || graph.called_again(l))
      unfused_slots.push_back(slots.back());
  }
  allocate_call_gradients(backend, graph);
}

// The gradients of a shared layer's calls other than its last, each made there and added into
// the parameters' (accumulates): one block, as large as the largest such layer's parameters.
void ParameterArena::allocate_call_gradients(Backend& backend, const ModelGraph& graph) {
  call_slots.assign(graph.size(), {});
  call_grads.reset();
  int64_t most = 0;
  for (std::size_t i = 0; i < graph.size(); ++i) {
    if (!graph.accumulates[i]) continue;
    int64_t span = 0;
    for (const LayerParam& p : params)
      if (static_cast<std::size_t>(p.layer) == graph.first_call(i)) span += (p.n + 15) / 16 * 16;
    most = std::max(most, span);
  }
  if (most > 0) {  // none where the shared layers have no parameters (Dropout, Activation)
    check_fits(backend, graph.name, float_bytes(most), "the gradients of a shared layer's calls",
               ": use fewer or smaller layers");
    call_grads = DeviceBlock(backend, static_cast<std::size_t>(float_bytes(most)));
  }
  for (std::size_t i = 0; i < graph.size(); ++i) {
    if (!graph.accumulates[i]) continue;
    call_slots[i] = slots;
    int64_t at = 0;
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (static_cast<std::size_t>(params[k].layer) != graph.first_call(i)) continue;
      call_slots[i][k].grad = call_grads.as<float>() + at;
      at += (params[k].n + 15) / 16 * 16;
    }
  }
}

bool ParameterArena::regularized(const std::vector<char>& trains) const {
  for (const LayerParam& p : params)
    if (p.regularizer.any() && updates(p, trains)) return true;
  return false;
}

void ParameterArena::regularize(Backend& backend, bool training, const std::vector<char>& trains,
                                StepCounters* counters, int64_t rows) const {
  for (const LayerParam& p : params) {
    if (!p.regularizer.any() || !updates(p, trains)) continue;
    backend.regularize(value(p), training ? grad(p) : nullptr, p.n,
                       static_cast<float>(p.regularizer.l1), static_cast<float>(p.regularizer.l2),
                       0.0f, counters, rows);
  }
}

void ParameterArena::add_call_gradients(Backend& backend, const ModelGraph& graph, std::size_t i,
                                        const std::vector<char>& trains) const {
  for (std::size_t k = 0; k < params.size(); ++k) {
    const LayerParam& p = params[k];
    if (static_cast<std::size_t>(p.layer) != graph.first_call(i) || !updates(p, trains)) continue;
    backend.add(grad(p), call_slots[i][k].grad, grad(p), p.n);
  }
}

void ParameterArena::initialize(Backend& backend, uint64_t seed) const {
  for (const LayerParam& p : params) {
    std::vector<float> host(static_cast<std::size_t>(p.n));
    initial_values(p.initializer, p.shape, {seed, static_cast<uint32_t>(p.layer), p.draw}, host);
    backend.upload(value(p), host.data(), host.size() * sizeof(float));
  }
}

}  // namespace crossover
