// One training step of a Dense chain as one cooperative kernel (backends/fused_mlp.h). Stages,
// separated by grid-wide barriers:
//   forward, one per layer: y = act(x . W + b), then the Dropout mask (the batch's rows are read
//     from the data set through the epoch's order: no separate gather);
//   loss (block 0): the batch's targets, loss_row per row (softmax and the cross-entropy's
//     gradient), the sums into the counters in row order;
//   backward, one per layer: dW = x^T . dz and db = column sums of dz, and dz of the layer below
//     (dz . W^T through the Dropout mask and the relu's derivative);
//   the optimizer: update_one on every parameter, then the counters' bookkeeping (as
//     optimizer_step's).
// Products are 32 x 32 output tiles, one block each, reduced in order over the depth in shared
// memory tiles; every element uses kernel_math.h's arithmetic, as the CPU's does.
#include <cooperative_groups.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/fused_mlp.h"
#include "backends/cuda_info.h"
#include "backends/kernel_math.h"
#include "backends/losses/list.h"
#include "core/error.h"

namespace crossover::cuda {

namespace cg = cooperative_groups;

namespace {

struct FusedLayerArgs {
  int64_t in, out;
  ActivationKind act;
  float rate, scale;
  uint32_t dropout_layer;
  int32_t w_decay, b_decay;
  int forward_slices;                          // split-K of the forward product (fused_mlp_slices)
  int backward_slices;                         // and of the input gradient's (depth: out)
  float *w, *b, *dw, *db, *w1, *w2, *b1, *b2;  // values, gradients, optimizer slots
  float *w3, *b3;                              // Adam's velocity_hat with amsgrad, else null
  float* h;                                    // (rows, out): output after Dropout; last: logits
  uint8_t* mask;                               // (rows, out) when rate > 0
};

struct FusedArgs {
  int nlayers;
  FusedLayerArgs layer[kFusedMaxLayers];
  LossKind loss;
  OptimizerConfig opt;
  const float* x;
  const float* y;
  int64_t x_cols, y_cols;
  const int32_t* indices;
  int64_t batch, rows;
  float inv_m;
  uint64_t seed;
  float *probs, *targets, *dz0, *dz1;
  double* row_sums;  // (rows, 2): each row's loss and whether it is right
  float* partials;   // the split products' slices
  StepCounters* counters;
};

constexpr int kT = kFusedTile;

// out(r, c, slice, sum over p in the slice of lhs(r, p) * rhs(p, c)) for the (rows, cols) result:
// 32 x 32 tiles, each of its `slices` parts of the depth (split-K: runs of whole 32-deep chunks)
// one item, spread over the grid's blocks; each sum runs over its p in order, in float32 fused
// multiply-adds. With one slice out gets the whole sum.
template <class Lhs, class Rhs, class Out>
__device__ void tile_product(int64_t rows, int64_t cols, int64_t depth, int slices, Lhs lhs,
                             Rhs rhs, Out out, float (*sl)[kT + 1], float (*sr)[kT + 1]) {
  const int tx = static_cast<int>(threadIdx.x) % kT, ty = static_cast<int>(threadIdx.x) / kT;
  constexpr int kRowsPerThread = kT * kT / kFusedThreads;  // 4
  constexpr int kStride = kFusedThreads / kT;              // 8
  const int64_t tiles_c = (cols + kT - 1) / kT, tiles = ((rows + kT - 1) / kT) * tiles_c;
  const int64_t chunks = (depth + kT - 1) / kT;
  const int64_t per_slice = ((chunks + slices - 1) / slices) * kT;
  for (int64_t t = blockIdx.x; t < tiles * slices; t += gridDim.x) {
    const int slice = static_cast<int>(t / tiles);
    const int64_t tile = t - slice * tiles;
    const int64_t r0 = (tile / tiles_c) * kT, c0 = (tile % tiles_c) * kT;
    const int64_t begin = slice * per_slice;
    const int64_t end = begin + per_slice < depth ? begin + per_slice : depth;
    float acc[kRowsPerThread] = {};
    for (int64_t p0 = begin; p0 < end; p0 += kT) {
      for (int q = 0; q < kRowsPerThread; ++q) {
        const int i = ty + kStride * q;
        const int64_t r = r0 + i, p = p0 + tx;
        sl[i][tx] = (r < rows && p < end) ? lhs(r, p) : 0.0f;
        const int64_t pp = p0 + i, c = c0 + tx;
        sr[i][tx] = (pp < end && c < cols) ? rhs(pp, c) : 0.0f;
      }
      __syncthreads();
      const int kk = end - p0 < kT ? static_cast<int>(end - p0) : kT;
      for (int k = 0; k < kk; ++k) {
        const float b = sr[k][tx];
        for (int q = 0; q < kRowsPerThread; ++q) acc[q] = fmaf(sl[ty + kStride * q][k], b, acc[q]);
      }
      __syncthreads();
    }
    for (int q = 0; q < kRowsPerThread; ++q) {
      const int64_t r = r0 + ty + kStride * q, c = c0 + tx;
      if (r < rows && c < cols) out(r, c, slice, acc[q]);
    }
  }
}

// A (rows, cols) product through `finish(r, c, sum)`: in one stage with one slice; with several,
// each slice's sums into partials, a grid-wide barrier, then the slices added in order.
template <class Lhs, class Rhs, class Finish>
__device__ void product(cg::grid_group& grid, int64_t rows, int64_t cols, int64_t depth, int slices,
                        float* partials, Lhs lhs, Rhs rhs, Finish finish, float (*sl)[kT + 1],
                        float (*sr)[kT + 1]) {
  if (slices <= 1) {
    tile_product(
        rows, cols, depth, 1, lhs, rhs,
        [&](int64_t r, int64_t c, int, float acc) { finish(r, c, acc); }, sl, sr);
    return;
  }
  const int64_t size = rows * cols;
  tile_product(
      rows, cols, depth, slices, lhs, rhs,
      [&](int64_t r, int64_t c, int s, float acc) { partials[s * size + r * cols + c] = acc; }, sl,
      sr);
  grid.sync();
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = thread; e < size; e += threads) {
    float acc = partials[e];
    for (int s = 1; s < slices; ++s) acc += partials[s * size + e];
    finish(e / cols, e % cols, acc);
  }
}

__global__ void __launch_bounds__(kFusedThreads) fused_mlp_kernel(FusedArgs a) {
  cg::grid_group grid = cg::this_grid();
  __shared__ float sl[kT][kT + 1], sr[kT][kT + 1];
  __shared__ UpdateConstants s_u;
  StepCounters* ctr = a.counters;
  // Read once, before any block can change them (only block 0's last thread does, at the end,
  // after every block has passed the barriers below).
  const int64_t step = ctr->step, batch_index = ctr->batch_index;
  if (threadIdx.x == 0) {
    const float lr = scheduled_learning_rate(a.opt.schedule, step);
    s_u = update_constants(a.opt, lr, step + 1, *ctr);
  }
  const int32_t* idx = a.indices + batch_index * a.batch;
  const int64_t m = a.rows;
  const int last = a.nlayers - 1;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const float* x = a.x;
  const int64_t x_cols = a.x_cols;

  // ---- forward ----
  for (int l = 0; l < a.nlayers; ++l) {
    const FusedLayerArgs& L = a.layer[l];
    const float* in = l == 0 ? nullptr : a.layer[l - 1].h;
    const int64_t k = L.in, n = L.out;
    const float* w = L.w;
    const float* b = L.b;
    const bool hidden = l != last;
    const uint64_t seed = a.seed;
    product(
        grid, m, n, k, L.forward_slices, a.partials,
        [&](int64_t r, int64_t p) {
          return in ? in[r * k + p] : x[static_cast<int64_t>(idx[r]) * x_cols + p];
        },
        [&](int64_t p, int64_t c) { return w[p * n + c]; },
        [&](int64_t r, int64_t c, float acc) {
          float v = b ? acc + b[c] : acc;
          if (hidden) {
            v = activation_value(L.act, v, 0.0f);
            if (L.rate > 0.0f) {
              const bool keep = dropout_keep(seed, L.dropout_layer, static_cast<uint64_t>(step),
                                             static_cast<uint64_t>(r * n + c), L.rate);
              L.mask[r * n + c] = keep ? 1 : 0;
              v = keep ? v * L.scale : 0.0f;
            }
          }
          L.h[r * n + c] = v;
        },
        sl, sr);
    grid.sync();
  }

  // ---- loss (block 0) ----
  float* dz_last = (last % 2 == 0) ? a.dz0 : a.dz1;
  if (blockIdx.x == 0) {
    const int64_t c = a.layer[last].out;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
      const float* src = a.y + static_cast<int64_t>(idx[r]) * a.y_cols;
      for (int64_t j = 0; j < a.y_cols; ++j) a.targets[r * a.y_cols + j] = src[j];
      const LossRow row = loss_row(a.loss, ActivationKind::softmax, a.layer[last].h + r * c,
                                   a.targets, r, c, a.probs + r * c, dz_last + r * c, a.inv_m);
      a.row_sums[2 * r] = row.loss;
      a.row_sums[2 * r + 1] = row.correct;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double ls = 0.0, rs = 0.0;
      for (int64_t r = 0; r < m; ++r) ls += a.row_sums[2 * r], rs += a.row_sums[2 * r + 1];
      ctr->loss_sum += ls;
      ctr->correct_sum += rs;
      ctr->sample_count += static_cast<double>(m);
    }
  }
  grid.sync();

  // ---- backward ----
  for (int l = last; l >= 0; --l) {
    const FusedLayerArgs& L = a.layer[l];
    const float* dz = (l % 2 == 0) ? a.dz0 : a.dz1;
    float* dz_below = (l % 2 == 0) ? a.dz1 : a.dz0;
    const float* in = l == 0 ? nullptr : a.layer[l - 1].h;
    const int64_t k = L.in, n = L.out;
    float* dw = L.dw;
    tile_product(
        k, n, m, 1,
        [&](int64_t i, int64_t r) {
          return in ? in[r * k + i] : x[static_cast<int64_t>(idx[r]) * x_cols + i];
        },
        [&](int64_t r, int64_t c) { return dz[r * n + c]; },
        [&](int64_t i, int64_t c, int, float acc) { dw[i * n + c] = acc; }, sl, sr);
    if (L.db)
      for (int64_t c = thread; c < n; c += threads) {
        float s = 0.0f;
        for (int64_t r = 0; r < m; ++r) s += dz[r * n + c];
        L.db[c] = s;
      }
    if (l > 0) {
      const FusedLayerArgs& P = a.layer[l - 1];
      const float* w = L.w;
      product(
          grid, m, k, n, L.backward_slices, a.partials,
          [&](int64_t r, int64_t j) { return dz[r * n + j]; },
          [&](int64_t j, int64_t i) { return w[i * n + j]; },
          [&](int64_t r, int64_t i, float acc) {
            float v = acc;
            if (P.rate > 0.0f) v = P.mask[r * k + i] ? v * P.scale : 0.0f;
            if (P.act == ActivationKind::relu) v = P.h[r * k + i] > 0.0f ? v : 0.0f;
            dz_below[r * k + i] = v;
          },
          sl, sr);
    }
    grid.sync();
  }

  // ---- the optimizer ----
  const UpdateConstants u = s_u;
  for (int l = 0; l < a.nlayers; ++l) {
    const FusedLayerArgs& L = a.layer[l];
    const int64_t nw = L.in * L.out;
    for (int64_t i = thread; i < nw; i += threads) {
      float w = L.w[i];
      update_one(a.opt, u, 1.0f, L.w_decay != 0, w, L.dw[i], L.w1, L.w2, L.w3, i);
      L.w[i] = w;
    }
    if (L.b)
      for (int64_t i = thread; i < L.out; i += threads) {
        float w = L.b[i];
        update_one(a.opt, u, 1.0f, L.b_decay != 0, w, L.db[i], L.b1, L.b2, L.b3, i);
        L.b[i] = w;
      }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    ctr->learning_rate = u.lr;
    ctr->grad_scale = 1.0f;
    record_step(a.opt, u, *ctr, step + 1);
    ctr->step = step + 1;
    ctr->batch_index = batch_index + 1;
  }
}

// ---- calibrate's micro-kernels (measure_fused_step_rates) ----
// `iterations` grid-wide barriers of a cooperative grid, and nothing else.
__global__ void __launch_bounds__(kFusedThreads) fused_grid_sync_kernel(int iterations) {
  cg::grid_group grid = cg::this_grid();
  for (int i = 0; i < iterations; ++i) grid.sync();
}

// The fused kernel's tile product c(rows, cols) = a(rows, depth) . b(depth, cols), one slice,
// with its own tile_product: what each of its product stages runs.
__global__ void __launch_bounds__(kFusedThreads)
    fused_tile_kernel(const float* a, const float* b, float* c, int64_t rows, int64_t cols,
                      int64_t depth) {
  __shared__ float sl[kT][kT + 1], sr[kT][kT + 1];
  tile_product(
      rows, cols, depth, 1, [&](int64_t r, int64_t p) { return a[r * depth + p]; },
      [&](int64_t p, int64_t j) { return b[p * cols + j]; },
      [&](int64_t r, int64_t j, int, float acc) { c[r * cols + j] = acc; }, sl, sr);
}

// Scratch layout: row sums (doubles), then floats, then the masks.
struct ScratchLayout {
  std::size_t row_sums = 0, floats = 0, partials = 0, masks = 0, total = 0;
};
ScratchLayout scratch_layout(const FusedMlpStep& s) {
  ScratchLayout l;
  const auto rows = static_cast<std::size_t>(s.rows);
  std::size_t floats = 0, masks = 0, widest = 0;
  for (const FusedDense& d : s.layers) {
    floats += rows * static_cast<std::size_t>(d.out);
    widest = std::max(widest, static_cast<std::size_t>(std::max(d.in, d.out)));
    if (d.dropout > 0.0f) masks += rows * static_cast<std::size_t>(d.out);
  }
  const auto c = static_cast<std::size_t>(s.layers.empty() ? 0 : s.layers.back().out);
  floats += 2 * rows * widest + rows * c + rows * static_cast<std::size_t>(s.y_cols);
  l.partials = floats;  // in floats from the floats' start: the most slices any product may take
  std::size_t most = 0;
  for (const FusedDense& d : s.layers) {
    const auto in = static_cast<std::size_t>(d.in), out = static_cast<std::size_t>(d.out);
    most = std::max({most, (in + kT - 1) / kT * rows * out, (out + kT - 1) / kT * rows * in});
  }
  floats += most;
  l.row_sums = 0;
  l.floats = 2 * rows * sizeof(double);
  l.masks = l.floats + floats * sizeof(float);
  l.total = l.masks + masks + 256;
  return l;
}

}  // namespace

cudaError_t fused_mlp_blocks_per_sm(int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, fused_mlp_kernel, kFusedThreads, 0);
}

std::size_t fused_mlp_scratch_bytes(const FusedMlpStep& step) { return scratch_layout(step).total; }

cudaError_t launch_fused_mlp(cudaStream_t stream, const FusedMlpStep& s, StepCounters* counters,
                             void* scratch, int blocks) {
  if (s.layers.empty() || s.layers.size() > static_cast<std::size_t>(kFusedMaxLayers) ||
      s.rows <= 0 || blocks < 1)
    return cudaErrorInvalidValue;
  const ScratchLayout layout = scratch_layout(s);
  auto* base = static_cast<unsigned char*>(scratch);
  float* f = reinterpret_cast<float*>(base + layout.floats);
  uint8_t* mask = base + layout.masks;
  const int64_t rows = s.rows;
  FusedArgs a{};
  a.nlayers = static_cast<int>(s.layers.size());
  int64_t widest = 0;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const FusedDense& d = s.layers[i];
    FusedLayerArgs& L = a.layer[i];
    L.in = d.in;
    L.out = d.out;
    L.act = d.activation;
    L.rate = d.dropout;
    L.scale = d.dropout > 0.0f ? 1.0f / (1.0f - d.dropout) : 1.0f;  // as the CPU computes it
    L.dropout_layer = d.dropout_layer;
    L.w = d.kernel.value;
    L.dw = d.kernel.grad;
    L.w1 = d.kernel.slot1;
    L.w2 = d.kernel.slot2;
    L.w3 = d.kernel.slot3;
    L.w_decay = d.kernel.decay ? 1 : 0;
    if (d.bias.n > 0) {
      L.b = d.bias.value;
      L.db = d.bias.grad;
      L.b1 = d.bias.slot1;
      L.b2 = d.bias.slot2;
      L.b3 = d.bias.slot3;
      L.b_decay = d.bias.decay ? 1 : 0;
    }
    const int64_t row_tiles = (rows + kT - 1) / kT, in_tiles = (d.in + kT - 1) / kT,
                  out_tiles = (d.out + kT - 1) / kT;
    L.forward_slices = fused_mlp_slices(d.in, row_tiles * out_tiles, blocks);
    L.backward_slices = i > 0 ? fused_mlp_slices(d.out, row_tiles * in_tiles, blocks) : 1;
    L.h = f;
    f += rows * d.out;
    if (d.dropout > 0.0f) {
      L.mask = mask;
      mask += rows * d.out;
    }
    widest = std::max({widest, d.in, d.out});
  }
  a.dz0 = f;
  f += rows * widest;
  a.dz1 = f;
  f += rows * widest;
  a.probs = f;
  f += rows * s.layers.back().out;
  a.targets = f;
  a.partials = reinterpret_cast<float*>(base + layout.floats) + layout.partials;
  a.row_sums = reinterpret_cast<double*>(base + layout.row_sums);
  a.loss = s.loss;
  a.opt = s.optimizer;
  a.x = s.x_rows;
  a.y = s.y_rows;
  a.x_cols = s.x_cols;
  a.y_cols = s.y_cols;
  a.indices = s.indices;
  a.batch = s.batch;
  a.rows = rows;
  a.inv_m = 1.0f / static_cast<float>(s.mean_rows > 0 ? s.mean_rows : rows);
  a.seed = s.seed;
  a.counters = counters;
  void* args[] = {&a};
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&fused_mlp_kernel),
                                     dim3(static_cast<unsigned>(blocks)), dim3(kFusedThreads), args,
                                     0, stream);
}

}  // namespace crossover::cuda

namespace crossover {

namespace {

void fused_check(int ordinal, cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw Error("cuda:" + std::to_string(ordinal),
              std::string(call) + " failed: " + cudaGetErrorString(e));
}

// The median seconds of `reps` runs of `enqueue` on `stream`, each between two events.
template <class F>
double median_seconds(int ordinal, cudaStream_t stream, int reps, F enqueue) {
  cudaEvent_t begin = nullptr, end = nullptr;
  fused_check(ordinal, cudaEventCreate(&begin), "cudaEventCreate");
  fused_check(ordinal, cudaEventCreate(&end), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    fused_check(ordinal, cudaEventRecord(begin, stream), "cudaEventRecord");
    fused_check(ordinal, enqueue(), "a fused-step calibration kernel");
    fused_check(ordinal, cudaEventRecord(end, stream), "cudaEventRecord");
    fused_check(ordinal, cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    fused_check(ordinal, cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    t.push_back(static_cast<double>(ms) * 1e-3);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

}  // namespace

FusedStepRates measure_fused_step_rates(int ordinal, bool quick) {
  fused_check(ordinal, cudaSetDevice(ordinal), "cudaSetDevice");
  int cooperative = 0, sms = 0, l2 = 0, per_sm = 0;
  fused_check(ordinal, cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, ordinal),
              "cudaDeviceGetAttribute (cooperative launch)");
  if (!cooperative)
    throw Error("cuda:" + std::to_string(ordinal), "the device has no cooperative launch");
  fused_check(ordinal, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal),
              "cudaDeviceGetAttribute (multiprocessors)");
  fused_check(ordinal, cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ordinal),
              "cudaDeviceGetAttribute (L2 size)");
  fused_check(ordinal, cuda::fused_mlp_blocks_per_sm(&per_sm), "the fused kernel's occupancy");
  if (per_sm < 1)
    throw Error("cuda:" + std::to_string(ordinal),
                "no block of the fused kernel fits on a multiprocessor");
  FusedStepRates r;
  r.blocks_per_sm = per_sm;
  r.l2_bytes = l2;
  const int blocks = sms * per_sm;
  const int reps = quick ? 5 : 11;
  cudaStream_t stream = nullptr;
  fused_check(ordinal, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              "cudaStreamCreate");

  // Barriers: the fused kernel's full grid, two loop lengths; the difference per barrier.
  const int short_loop = 100, long_loop = quick ? 600 : 2100;
  auto syncs = [&](int iterations) {
    return median_seconds(ordinal, stream, reps, [&] {
      void* args[] = {&iterations};
      return cudaLaunchCooperativeKernel(
          reinterpret_cast<const void*>(&cuda::fused_grid_sync_kernel),
          dim3(static_cast<unsigned>(blocks)), dim3(kFusedThreads), args, 0, stream);
    });
  };
  syncs(short_loop);  // warm up
  r.grid_sync_seconds =
      std::max(1e-9, (syncs(long_loop) - syncs(short_loop)) / double(long_loop - short_loop));

  // Tiles: 8 rows of tiles by as many columns as leave every tile a resident block of its own,
  // at two depths; the difference per tile's FLOPs. The operands (a few MB) stay in L2, as the
  // fused step's parameters do.
  const int64_t tile_rows = 8, tile_cols = std::max(1, blocks / 8);
  const int64_t rows = tile_rows * kFusedTile, cols = tile_cols * kFusedTile;
  const int64_t shallow = 256, deep = quick ? 1024 : 2048;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  fused_check(ordinal, cudaMalloc(&a, sizeof(float) * rows * deep), "cudaMalloc");
  fused_check(ordinal, cudaMalloc(&b, sizeof(float) * deep * cols), "cudaMalloc");
  fused_check(ordinal, cudaMalloc(&c, sizeof(float) * rows * cols), "cudaMalloc");
  fused_check(ordinal, cudaMemsetAsync(a, 0, sizeof(float) * rows * deep, stream), "cudaMemset");
  fused_check(ordinal, cudaMemsetAsync(b, 0, sizeof(float) * deep * cols, stream), "cudaMemset");
  auto tiles = [&](int64_t depth) {
    return median_seconds(ordinal, stream, reps, [&] {
      cuda::fused_tile_kernel<<<static_cast<unsigned>(tile_rows * tile_cols), kFusedThreads, 0,
                                stream>>>(a, b, c, rows, cols, depth);
      return cudaGetLastError();
    });
  };
  tiles(shallow);  // warm up
  const double dt = tiles(deep) - tiles(shallow);
  r.block_flops_per_second =
      2.0 * kFusedTile * kFusedTile * static_cast<double>(deep - shallow) / std::max(dt, 1e-9);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaStreamDestroy(stream);
  return r;
}

}  // namespace crossover
