// The fused training step's predicted time (predict_fused_step): its stages' tile products, loss
// and update, its grid barriers and its launch, from the profile's fused-step rates.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"

namespace crossover::perf {

namespace {

// The model as the fused step's rules see it (backends/fused_mlp.h), from its description: a
// stack of layers (ModelDesc is a Sequential's), no sample weights, no metrics beyond accuracy.
// `slots` holds the parameter sizes the view points at.
FusedModelView fused_view_of(const ModelDesc& model, Precision precision, int ranks,
                             std::vector<ParamSlot>& slots) {
  FusedModelView v;
  v.loss = model.loss == "categorical_crossentropy" ? LossKind::categorical_crossentropy
           : model.loss == "sparse_categorical_crossentropy"
               ? LossKind::sparse_categorical_crossentropy
               : LossKind::mean_squared_error;  // any other: refused as not a cross-entropy
  v.optimizer = model.optimizer;
  v.ranks = ranks;
  v.fp32 = precision == Precision::fp32;
  slots.reserve(2 * model.layers.size());  // pointers into it stay valid
  // A graph: whether it is a chain, and which of its layers are called more than once.
  std::vector<char> shared(model.layers.size(), 0);
  if (model.graph) {
    const ModelDesc::Graph& g = *model.graph;
    for (std::size_t i = 0; i < g.inputs.size(); ++i)
      v.chain = v.chain && (i == 0 ? g.inputs[i].empty()
                                   : g.inputs[i] == std::vector<int>{static_cast<int>(i) - 1});
    shared = called_more_than_once(g.shared_with);
  }
  int64_t width = model.input_width;
  for (const Layer& l : model.layers) {
    // What each kind tells the fused step's rules (as Sequential's compile asks it).
    const LayerKind& kind = layer_kind(l);
    FusedLayerView lv;
    kind.describe_fused(l, lv);
    lv.name = l.name.empty() ? std::string(layer_type_name(l.type)) : l.name;
    lv.activation = kind.activation(l).kind;
    lv.trainable = l.trainable;
    lv.shared = shared[static_cast<std::size_t>(&l - model.layers.data())] != 0;
    lv.in_width = width;
    lv.out_width = width;
    if (lv.kind == FusedLayerView::Kind::dense) {
      const DenseArgs& a = l.args<DenseArgs>();
      lv.out_width = a.units;
      ParamSlot kernel;
      kernel.n = width * a.units;
      slots.push_back(kernel);
      lv.kernel = &slots.back();
      if (a.use_bias) {
        ParamSlot bias;
        bias.n = a.units;
        bias.decay = false;
        slots.push_back(bias);
        lv.bias = &slots.back();
      }
      width = a.units;
    }
    v.layers.push_back(lv);
  }
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

FusedPrediction predict_fused_step(const ModelDesc& model, int64_t rows, const Profile& profile,
                                   Precision precision, int ranks) {
  FusedPrediction f;
  if (rows < 1) throw Error("cost model", "a step needs at least one row");
  std::vector<ParamSlot> slots;
  FusedMlpStep step;
  f.refusal = fused_mlp_chain(fused_view_of(model, precision, ranks, slots), step);
  if (!f.refusal.empty()) return f;
  step.rows = rows;
  step.batch = rows;
  step.y_cols = step.loss == LossKind::categorical_crossentropy ? step.layers.back().out : 1;
  f.state_bytes = fused_mlp_state_bytes(step);
  if (profile.kind != "gpu") {
    f.refusal = "the fused step runs on a GPU, and this is a CPU's profile";
    return f;
  }
  if (!profile.fused_step) {
    f.unpriced = fmt::format(
        "the profile ({}) has no fused-step rates (its grid barrier and tile rate: `crossover "
        "calibrate --device cuda:N` measures them)",
        profile.source.empty() ? profile.name : profile.source);
    return f;
  }
  const FusedStepRates& rates = *profile.fused_step;
  // Cooperative launch: calibrate measured the rates with one, so the device has it.
  f.refusal = fused_mlp_device_problem(step, true, rates.blocks_per_sm, rates.l2_bytes);
  if (!f.refusal.empty()) return f;
  const FusedLaunchShape shape =
      fused_mlp_launch_shape(profile.cores, rates.blocks_per_sm, fused_mlp_work_items(step));
  if (shape.blocks < 1) {
    f.refusal = "the profile records no multiprocessor";
    return f;
  }
  f.blocks = shape.blocks;
  const double bandwidth = profile.memory_bytes_per_second;
  const int64_t t = kFusedTile;
  // A product of (r, c, depth) in `slices` slices: its seconds, FLOPs and extra barriers (the
  // slices' sum after one), as tile_product and product in backends/cuda/fused_mlp.cu run it.
  auto product = [&](FusedStage& s, int64_t r, int64_t c, int64_t depth, int slices) {
    const int64_t tiles = ceil_div(r, t) * ceil_div(c, t);
    const int64_t chunks = std::max<int64_t>(ceil_div(ceil_div(depth, t), slices), 1);
    const int64_t items = tiles * slices;
    const int64_t item_flops = 2 * t * t * chunks * t;
    s.seconds +=
        static_cast<double>(ceil_div(items, f.blocks) * item_flops) / rates.block_flops_per_second;
    s.flops += items * item_flops;
    if (slices > 1) {  // the slices' partial sums added in order after a barrier
      const int64_t bytes = (slices + 1) * r * c * 4;
      s.bytes += bytes;
      s.seconds += static_cast<double>(bytes) / bandwidth;
      ++s.barriers;
    }
  };
  const int64_t m = rows;
  const std::size_t n = step.layers.size();
  for (std::size_t l = 0; l < n; ++l) {
    const FusedDense& d = step.layers[l];
    FusedStage s{fmt::format("forward dense {}->{}", d.in, d.out)};
    product(s, m, d.out, d.in,
            fused_mlp_slices(d.in, ceil_div(m, t) * ceil_div(d.out, t), f.blocks));
    ++s.barriers;
    f.stages.push_back(s);
  }
  {
    // Block 0 alone: the targets copied, each row's softmax, loss and gradient, the rows' sums.
    const int64_t c = step.layers.back().out;
    FusedStage s{"loss"};
    s.bytes = m * c * 4 * 3 + m * step.y_cols * 4 * 2 + m * 16 * 2;
    s.seconds = static_cast<double>(s.bytes) / (bandwidth / std::max(profile.cores, 1));
    s.barriers = 1;
    f.stages.push_back(s);
  }
  for (std::size_t l = n; l-- > 0;) {
    const FusedDense& d = step.layers[l];
    FusedStage s{fmt::format("backward dense {}->{}", d.in, d.out)};
    product(s, d.in, d.out, m, 1);  // dW = x^T . dz
    if (d.bias.n > 0) {             // db: column sums of dz
      const int64_t bytes = (m + 1) * d.out * 4;
      s.bytes += bytes;
      s.seconds += static_cast<double>(bytes) / bandwidth;
    }
    if (l > 0)  // dz below = dz . W^T (through the mask and the relu's derivative)
      product(s, m, d.in, d.out,
              fused_mlp_slices(d.out, ceil_div(m, t) * ceil_div(d.in, t), f.blocks));
    ++s.barriers;
    f.stages.push_back(s);
  }
  {
    int64_t params = 0;
    for (const FusedDense& d : step.layers) params += d.kernel.n + d.bias.n;
    const int64_t s_count = optimizer_slot_count(step.optimizer);
    FusedStage s{"update"};
    s.bytes = params * 4 * ((2 + s_count) + (1 + s_count));  // w, g, slots in; w, slots out
    s.seconds = static_cast<double>(s.bytes) / bandwidth;
    f.stages.push_back(s);
  }
  for (const FusedStage& s : f.stages) {
    f.barriers += s.barriers;
    f.stage_seconds += s.seconds;
  }
  f.launch_seconds = profile.launch_seconds;
  f.barrier_seconds = f.barriers * rates.grid_sync_seconds;
  f.step_seconds = f.launch_seconds + f.stage_seconds + f.barrier_seconds;
  return f;
}

}  // namespace crossover::perf
