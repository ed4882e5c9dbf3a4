// The CUDA backend against the CPU reference: every op on the same random inputs (odd shapes and
// the ragged last batch), outputs poisoned with NaN first so an unwritten element fails; the
// captured CUDA graph against the same calls made eagerly. Skipped where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "backends/losses/list.h"
#include "core/error.h"
#include "keras_adam_reference.h"
#include "nn/layers.h"  // activation_name
#include "nn/optimizers.h"

namespace crossover {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_values(std::size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Sparse labels as floats, one-hot rows, or 0/1 per element.
std::vector<float> random_labels(int64_t m, int64_t c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(static_cast<std::size_t>(m));
  for (float& x : v) x = static_cast<float>(gen() % static_cast<uint32_t>(c));
  return v;
}

// |got - want| <= atol + rtol |want| everywhere (NaN never passes); reports the first few misses.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: cuda " << g << ", cpu " << w;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Blocks of one backend, released at the end of the test.
class Memory {
 public:
  explicit Memory(Backend& b) : b_(b) {}
  ~Memory() {
    for (void* p : blocks_) b_.release(p);
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  Backend& backend() { return b_; }

  template <class T>
  T* alloc(std::size_t n) {
    void* p = b_.allocate(n * sizeof(T) + 64);  // room for a deliberately misaligned view
    blocks_.push_back(p);
    return static_cast<T*>(p);
  }
  float* values(const std::vector<float>& host) {
    float* p = alloc<float>(host.size());
    b_.upload(p, host.data(), host.size() * sizeof(float));
    return p;
  }
  float* poisoned(std::size_t n) {
    float* p = alloc<float>(n + 16);
    b_.fill(p, kNaN, static_cast<int64_t>(n + 16));
    return p;
  }
  StepCounters* counters(const StepCounters& c) {
    auto* p = alloc<StepCounters>(1);
    b_.upload(p, &c, sizeof c);
    return p;
  }
  std::vector<float> get(const float* p, std::size_t n) {
    std::vector<float> v(n);
    b_.download(v.data(), p, n * sizeof(float));
    return v;
  }
  template <class T>
  std::vector<T> get_raw(const T* p, std::size_t n) {
    std::vector<T> v(n);
    b_.download(v.data(), p, n * sizeof(T));
    return v;
  }
  StepCounters get_counters(const StepCounters* p) {
    StepCounters c;
    b_.download(&c, p, sizeof c);
    return c;
  }

 private:
  Backend& b_;
  std::vector<void*> blocks_;
};

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device: cuda_device_count() is 0 (no GPU, no driver, or a build "
                      "without nvcc)";
    cpu_ = make_cpu_backend(1);
    gpu_ = make_cuda_backend(0);
  }
  std::unique_ptr<Backend> cpu_, gpu_;
};

struct Shape3 {
  int64_t m, k, n;
};
const Shape3 kShapes[] = {{33, 97, 13}, {7, 97, 13}, {32, 784, 128}, {1, 1, 1}, {7, 128, 10}};

std::string shape_name(const Shape3& s) {
  return "m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n);
}

// ---- errors -------------------------------------------------------------------------------------

TEST(CudaBackendErrors, UnavailableDeviceIsAnErrorNamingTheDevice) {
  // Runs everywhere: without a GPU (or without nvcc) cuda:0 is unavailable; with one, an ordinal
  // past the last device is.
  const int count = cuda_device_count();
  const std::string where = "cuda:" + std::to_string(count);
  try {
    make_cuda_backend(count);
    FAIL() << "make_cuda_backend(" << count << ") did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(where + ": ", 0), 0u) << msg;
    if (count == 0) {
      EXPECT_TRUE(msg.find("no CUDA device is available (cudaGetDeviceCount: ") !=
                      std::string::npos ||
                  msg.find("has no CUDA backend") != std::string::npos)
          << msg;
      EXPECT_TRUE(cuda_devices().empty());
    }
  }
}

// ---- memory -------------------------------------------------------------------------------------

TEST_F(CudaBackendTest, AllocateIsZeroFilledAndTransfersRoundTrip) {
  Memory g(*gpu_);
  float* z = g.alloc<float>(1000);
  for (float v : g.get(z, 1000)) ASSERT_EQ(v, 0.0f);

  const auto host = random_values(4097, 1);
  float* p = g.values(host);
  EXPECT_EQ(g.get(p, host.size()), host);

  gpu_->fill(p, 2.5f, 33);
  std::vector<float> a(33, 0.0f), b(4097 - 33, 0.0f);
  gpu_->download_async(a.data(), p, 33 * sizeof(float));
  gpu_->download_async(b.data(), p + 33, b.size() * sizeof(float));
  gpu_->synchronize();
  for (float v : a) EXPECT_EQ(v, 2.5f);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), host.begin() + 33));
}

TEST_F(CudaBackendTest, ReleasedBlocksAreReusedAndZeroedAgain) {
  void* p = gpu_->allocate(12345);
  gpu_->fill(static_cast<float*>(p), 7.0f, 12345 / 4);
  gpu_->release(p);
  void* q = gpu_->allocate(12000);  // same size class
  std::vector<float> v(3000);
  gpu_->download(v.data(), q, v.size() * sizeof(float));
  for (float x : v) ASSERT_EQ(x, 0.0f);
  gpu_->release(q);
}

// ---- dense layer --------------------------------------------------------------------------------

TEST_F(CudaBackendTest, DenseForwardMatchesCpu) {
  const ActivationKind acts[] = {ActivationKind::linear, ActivationKind::relu,
                                 ActivationKind::sigmoid, ActivationKind::softmax};
  uint32_t seed = 10;
  for (const Shape3& s : kShapes)
    for (ActivationKind act : acts)
      for (bool bias : {true, false}) {
        SCOPED_TRACE(shape_name(s) + " " + std::string(activation_name(act)) +
                     (bias ? " bias" : " no bias"));
        const auto x = random_values(s.m * s.k, ++seed), w = random_values(s.k * s.n, ++seed),
                   b = random_values(s.n, ++seed);
        Memory c(*cpu_), g(*gpu_);
        float* yc = c.poisoned(s.m * s.n);
        float* yg = g.poisoned(s.m * s.n);
        cpu_->dense_forward(c.values(x), c.values(w), bias ? c.values(b) : nullptr, yc, s.m, s.k,
                            s.n, act);
        gpu_->dense_forward(g.values(x), g.values(w), bias ? g.values(b) : nullptr, yg, s.m, s.k,
                            s.n, act);
        expect_close(g.get(yg, s.m * s.n), c.get(yc, s.m * s.n), 1e-4, 1e-4, "y");
      }
}

// Pointers off 256-byte alignment (the model may pass views into a larger buffer): cuBLASLt must
// pick a kernel for the real alignment, and an unaligned bias takes the unfused path.
TEST_F(CudaBackendTest, DenseWithUnalignedPointersMatchesCpu) {
  const Shape3 s{33, 97, 13};
  const auto x = random_values(s.m * s.k, 51), w = random_values(s.k * s.n, 52),
             b = random_values(s.n, 53), dy = random_values(s.m * s.n, 54);
  Memory c(*cpu_), g(*gpu_);
  auto view = [](Memory& mem, const std::vector<float>& host) {
    float* p = mem.alloc<float>(host.size() + 1) + 1;  // 4-byte aligned only
    mem.backend().upload(p, host.data(), host.size() * sizeof(float));
    return p;
  };
  float* yc = c.poisoned(s.m * s.n);
  float* yg = g.poisoned(s.m * s.n + 1) + 1;
  cpu_->dense_forward(view(c, x), view(c, w), view(c, b), yc, s.m, s.k, s.n, ActivationKind::relu);
  gpu_->dense_forward(view(g, x), view(g, w), view(g, b), yg, s.m, s.k, s.n, ActivationKind::relu);
  expect_close(g.get(yg, s.m * s.n), c.get(yc, s.m * s.n), 1e-4, 1e-4, "y");

  float* dwc = c.poisoned(s.k * s.n);
  float* dbc = c.poisoned(s.n);
  float* dwg = g.poisoned(s.k * s.n + 1) + 1;
  float* dbg = g.poisoned(s.n + 1) + 1;
  cpu_->dense_backward_weights(view(c, x), view(c, dy), dwc, dbc, s.m, s.k, s.n);
  gpu_->dense_backward_weights(view(g, x), view(g, dy), dwg, dbg, s.m, s.k, s.n);
  expect_close(g.get(dwg, s.k * s.n), c.get(dwc, s.k * s.n), 1e-4, 1e-4, "dw");
  expect_close(g.get(dbg, s.n), c.get(dbc, s.n), 1e-4, 1e-4, "db");
}

TEST_F(CudaBackendTest, DenseBackwardWeightsMatchesCpu) {
  uint32_t seed = 100;
  for (const Shape3& s : kShapes)
    for (bool bias : {true, false}) {
      SCOPED_TRACE(shape_name(s) + (bias ? " with db" : " without db"));
      const auto x = random_values(s.m * s.k, ++seed), dy = random_values(s.m * s.n, ++seed);
      Memory c(*cpu_), g(*gpu_);
      float* dwc = c.poisoned(s.k * s.n);
      float* dwg = g.poisoned(s.k * s.n);
      float* dbc = bias ? c.poisoned(s.n) : nullptr;
      float* dbg = bias ? g.poisoned(s.n) : nullptr;
      cpu_->dense_backward_weights(c.values(x), c.values(dy), dwc, dbc, s.m, s.k, s.n);
      gpu_->dense_backward_weights(g.values(x), g.values(dy), dwg, dbg, s.m, s.k, s.n);
      expect_close(g.get(dwg, s.k * s.n), c.get(dwc, s.k * s.n), 1e-4, 1e-4, "dw");
      if (bias) expect_close(g.get(dbg, s.n), c.get(dbc, s.n), 1e-4, 1e-4, "db");
    }
}

TEST_F(CudaBackendTest, DenseBackwardInputMatchesCpu) {
  uint32_t seed = 200;
  for (const Shape3& s : kShapes) {
    SCOPED_TRACE(shape_name(s));
    const auto dy = random_values(s.m * s.n, ++seed), w = random_values(s.k * s.n, ++seed);
    Memory c(*cpu_), g(*gpu_);
    float* dxc = c.poisoned(s.m * s.k);
    float* dxg = g.poisoned(s.m * s.k);
    cpu_->dense_backward_input(c.values(dy), c.values(w), dxc, s.m, s.k, s.n);
    gpu_->dense_backward_input(g.values(dy), g.values(w), dxg, s.m, s.k, s.n);
    expect_close(g.get(dxg, s.m * s.k), c.get(dxc, s.m * s.k), 1e-4, 1e-4, "dx");
  }
}

TEST_F(CudaBackendTest, ReducedPrecisionProductsStayNearFloat32) {
  const Shape3 s{33, 784, 128};
  const auto x = random_values(s.m * s.k, 300), w = random_values(s.k * s.n, 301),
             b = random_values(s.n, 302);
  Memory c(*cpu_);
  float* yc = c.poisoned(s.m * s.n);
  cpu_->dense_forward(c.values(x), c.values(w), c.values(b), yc, s.m, s.k, s.n,
                      ActivationKind::linear);
  const auto want = c.get(yc, s.m * s.n);
  for (auto [precision, bound] :
       {std::pair{Precision::tf32, 3e-3}, std::pair{Precision::bf16, 2e-2}}) {
    SCOPED_TRACE(precision_name(precision));
    auto backend = make_cuda_backend(0, precision);
    Memory g(*backend);
    float* yg = g.poisoned(s.m * s.n);
    backend->dense_forward(g.values(x), g.values(w), g.values(b), yg, s.m, s.k, s.n,
                           ActivationKind::linear);
    const auto got = g.get(yg, s.m * s.n);
    for (float v : got) ASSERT_FALSE(std::isnan(v));
    EXPECT_LT(relative_error(got, want), bound);
  }
}

// ---- activations, dropout, batching -------------------------------------------------------------

TEST_F(CudaBackendTest, ActivationsMatchCpu) {
  const ActivationKind acts[] = {
      ActivationKind::linear,   ActivationKind::relu,       ActivationKind::sigmoid,
      ActivationKind::tanh,     ActivationKind::softmax,    ActivationKind::elu,
      ActivationKind::selu,     ActivationKind::leaky_relu, ActivationKind::gelu,
      ActivationKind::softplus, ActivationKind::swish,      ActivationKind::exponential};
  const std::pair<int64_t, int64_t> shapes[] = {{33, 13}, {7, 1000}, {1, 1}};
  uint32_t seed = 400;
  for (auto [m, n] : shapes)
    for (ActivationKind act : acts) {
      SCOPED_TRACE(std::string(activation_name(act)) + " m=" + std::to_string(m) +
                   " n=" + std::to_string(n));
      const std::size_t total = static_cast<std::size_t>(m * n);
      const auto x = random_values(total, ++seed, -4.0f, 4.0f), dy = random_values(total, ++seed);
      Memory c(*cpu_), g(*gpu_);
      float* yc = c.poisoned(total);
      float* yg = g.poisoned(total);
      const float alpha = 0.3f;
      const float* xc = c.values(x);
      const float* xg = g.values(x);
      cpu_->activation_forward(act, alpha, xc, yc, m, n);
      gpu_->activation_forward(act, alpha, xg, yg, m, n);
      expect_close(g.get(yg, total), c.get(yc, total), 1e-5, 1e-6, "y");

      float* dxc = c.poisoned(total);
      float* dxg = g.poisoned(total);
      cpu_->activation_backward(act, alpha, xc, yc, c.values(dy), dxc, m, n);
      gpu_->activation_backward(act, alpha, xg, yg, g.values(dy), dxg, m, n);
      expect_close(g.get(dxg, total), c.get(dxc, total), 1e-4, 1e-6, "dx");

      // dx may alias dy.
      float* dyc = c.values(dy);
      float* dyg = g.values(dy);
      cpu_->activation_backward(act, alpha, xc, yc, dyc, dyc, m, n);
      gpu_->activation_backward(act, alpha, xg, yg, dyg, dyg, m, n);
      expect_close(g.get(dyg, total), c.get(dyc, total), 1e-4, 1e-6, "dx aliasing dy");
    }
}

// A traced call()'s square root (ActivationKind::sqrt), on positive values.
TEST_F(CudaBackendTest, SqrtMatchesCpu) {
  const int64_t m = 33, n = 13;
  const std::size_t total = static_cast<std::size_t>(m * n);
  const auto x = random_values(total, 450, 0.01f, 4.0f), dy = random_values(total, 451);
  Memory c(*cpu_), g(*gpu_);
  float* yc = c.poisoned(total);
  float* yg = g.poisoned(total);
  cpu_->activation_forward(ActivationKind::sqrt, 0.0f, c.values(x), yc, m, n);
  gpu_->activation_forward(ActivationKind::sqrt, 0.0f, g.values(x), yg, m, n);
  expect_close(g.get(yg, total), c.get(yc, total), 1e-6, 1e-7, "y");
  float* dxc = c.poisoned(total);
  float* dxg = g.poisoned(total);
  cpu_->activation_backward(ActivationKind::sqrt, 0.0f, nullptr, yc, c.values(dy), dxc, m, n);
  gpu_->activation_backward(ActivationKind::sqrt, 0.0f, nullptr, yg, g.values(dy), dxg, m, n);
  expect_close(g.get(dxg, total), c.get(dxc, total), 1e-5, 1e-7, "dx");
}

TEST_F(CudaBackendTest, DropoutDrawsTheCpuMaskExactly) {
  for (auto [m, n, rate] :
       {std::tuple{33, 97, 0.2f}, std::tuple{7, 1000, 0.5f}, std::tuple{3, 5, 0.0f}}) {
    SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) +
                 " rate=" + std::to_string(rate));
    const std::size_t total = static_cast<std::size_t>(m) * n;
    const auto x = random_values(total, 500, -1.0f, 1.0f), dy = random_values(total, 501);
    StepCounters counters;
    counters.step = 1234567;
    Memory c(*cpu_), g(*gpu_);
    uint8_t* mc = c.alloc<uint8_t>(total);
    uint8_t* mg = g.alloc<uint8_t>(total);
    float* yc = c.poisoned(total);
    float* yg = g.poisoned(total);
    cpu_->dropout_forward(c.values(x), yc, mc, m, n, rate, 42, 3, c.counters(counters), 0);
    gpu_->dropout_forward(g.values(x), yg, mg, m, n, rate, 42, 3, g.counters(counters), 0);
    EXPECT_EQ(g.get_raw(mg, total), c.get_raw(mc, total));
    EXPECT_EQ(g.get(yg, total), c.get(yc, total));

    float* dxc = c.poisoned(total);
    float* dxg = g.poisoned(total);
    cpu_->dropout_backward(c.values(dy), mc, dxc, m, n, rate);
    gpu_->dropout_backward(g.values(dy), mg, dxg, m, n, rate);
    EXPECT_EQ(g.get(dxg, total), c.get(dxc, total));

    // The fused ReLU + dropout backward, from the output of ReLU then dropout.
    cpu_->activation_forward(ActivationKind::relu, 0.0f, yc, yc, m, n);
    gpu_->activation_forward(ActivationKind::relu, 0.0f, yg, yg, m, n);
    float* dzc = c.poisoned(total);
    float* dzg = g.poisoned(total);
    cpu_->relu_dropout_backward(yc, mc, c.values(dy), dzc, m, n, rate);
    gpu_->relu_dropout_backward(yg, mg, g.values(dy), dzg, m, n, rate);
    EXPECT_EQ(g.get(dzg, total), c.get(dzc, total));
  }
}

TEST_F(CudaBackendTest, NoiseLayersDrawTheCpuNoise) {
  // SpatialDropout2D's keep is drawn from the same uniform on both: exact. The Gaussian draws go
  // through logf, sqrtf, cosf and sinf, which the GPU rounds its own way: within a few ulps.
  for (auto [kind, m, n, channels, amount, first_row] :
       {std::tuple{NoiseKind::gaussian_noise, 33, 97, 1, 0.3f, 0},
        std::tuple{NoiseKind::gaussian_dropout, 7, 1000, 1, 0.5f, 5},
        std::tuple{NoiseKind::spatial_dropout, 9, 60, 12, 0.4f, 3}}) {
    SCOPED_TRACE("kind=" + std::to_string(static_cast<int>(kind)) + " m=" + std::to_string(m));
    const std::size_t total = static_cast<std::size_t>(m) * n;
    const auto x = random_values(total, 600, -1.0f, 1.0f);
    StepCounters counters;
    counters.step = 77;
    Memory c(*cpu_), g(*gpu_);
    float* yc = c.poisoned(total);
    float* yg = g.poisoned(total);
    float* fc = c.poisoned(total);
    float* fg = g.poisoned(total);
    cpu_->noise_forward(kind, c.values(x), yc, fc, m, n, channels, amount, 42, 3,
                        c.counters(counters), first_row);
    gpu_->noise_forward(kind, g.values(x), yg, fg, m, n, channels, amount, 42, 3,
                        g.counters(counters), first_row);
    if (kind == NoiseKind::spatial_dropout) {
      EXPECT_EQ(g.get(yg, total), c.get(yc, total));
      EXPECT_EQ(g.get(fg, total), c.get(fc, total));
    } else {
      expect_close(g.get(yg, total), c.get(yc, total), 1e-5, 1e-6, "y");
    }
  }
}

TEST_F(CudaBackendTest, GatherRowsReadsTheBatchIndexOnTheDevice) {
  const int64_t rows = 50, cols = 13, batch = 8;
  const auto src = random_values(rows * cols, 600);
  std::vector<int32_t> order(rows);
  for (int64_t i = 0; i < rows; ++i) order[i] = static_cast<int32_t>((i * 17 + 5) % rows);
  const auto labels = random_labels(rows, 10, 601);
  for (auto [batch_index, m] :
       {std::pair<int64_t, int64_t>{2, 8}, std::pair<int64_t, int64_t>{6, 2}}) {
    SCOPED_TRACE("batch_index=" + std::to_string(batch_index) + " m=" + std::to_string(m));
    StepCounters counters;
    counters.batch_index = batch_index;
    Memory c(*cpu_), g(*gpu_);
    auto* ic = c.alloc<int32_t>(rows);
    auto* ig = g.alloc<int32_t>(rows);
    cpu_->upload(ic, order.data(), rows * sizeof(int32_t));
    gpu_->upload(ig, order.data(), rows * sizeof(int32_t));
    float* dc = c.poisoned(m * cols);
    float* dg = g.poisoned(m * cols);
    cpu_->gather_rows(c.values(src), cols, ic, batch, c.counters(counters), m, dc);
    gpu_->gather_rows(g.values(src), cols, ig, batch, g.counters(counters), m, dg);
    EXPECT_EQ(g.get(dg, m * cols), c.get(dc, m * cols));
    float* lc = c.poisoned(m);
    float* lg = g.poisoned(m);
    cpu_->gather_rows(c.values(labels), 1, ic, batch, c.counters(counters), m, lc);
    gpu_->gather_rows(g.values(labels), 1, ig, batch, g.counters(counters), m, lg);
    EXPECT_EQ(g.get(lg, m), c.get(lc, m));
  }
}

// ---- loss ---------------------------------------------------------------------------------------

TEST_F(CudaBackendTest, LossesMatchCpuIncludingCounters) {
  struct Case {
    LossConfig loss;
    ActivationKind act;
    const char* name;
  };
  const Case cases[] = {
      {LossKind::sparse_categorical_crossentropy, ActivationKind::softmax, "sparse CE + softmax"},
      {LossKind::categorical_crossentropy, ActivationKind::softmax, "CE + softmax"},
      {LossKind::binary_crossentropy, ActivationKind::sigmoid, "BCE + sigmoid"},
      {LossKind::mean_squared_error, ActivationKind::linear, "MSE + linear"},
      {LossKind::mean_squared_error, ActivationKind::sigmoid, "MSE + sigmoid"},
      {LossKind::mean_squared_error, ActivationKind::softmax, "MSE + softmax"},
      {LossKind::huber, ActivationKind::linear, "Huber + linear"},
      {LossConfig(LossKind::huber, 0.2f), ActivationKind::tanh, "Huber delta 0.2 + tanh"},
      {LossKind::binary_crossentropy, ActivationKind::linear, "BCE + linear (probabilities)"},
      {LossKind::categorical_crossentropy, ActivationKind::linear, "CE + linear (probabilities)"},
      {LossKind::sparse_categorical_crossentropy, ActivationKind::linear, "sparse CE + linear"},
  };
  uint32_t seed = 700;
  for (const Case& k : cases)
    for (auto [m, c] : {std::pair<int64_t, int64_t>{33, 10}, std::pair<int64_t, int64_t>{7, 13}})
      for (bool outputs : {true, false}) {
        SCOPED_TRACE(std::string(k.name) + " m=" + std::to_string(m) + " c=" + std::to_string(c) +
                     (outputs ? " with probs and d_out" : " without probs or d_out"));
        const std::size_t total = static_cast<std::size_t>(m * c);
        // Probabilities-given cases take values in (0, 1); logits anywhere.
        const bool probabilities = k.act == ActivationKind::linear &&
                                   loss_rules(k.loss.kind).logits != ActivationKind::linear;
        const auto out = probabilities ? random_values(total, ++seed, 0.01f, 0.99f)
                                       : random_values(total, ++seed, -3.0f, 3.0f);
        std::vector<float> targets;
        if (k.loss.kind == LossKind::sparse_categorical_crossentropy) {
          targets = random_labels(m, c, ++seed);
        } else if (k.loss.kind == LossKind::categorical_crossentropy) {
          targets.assign(total, 0.0f);
          const auto lab = random_labels(m, c, ++seed);
          for (int64_t r = 0; r < m; ++r) targets[r * c + static_cast<int64_t>(lab[r])] = 1.0f;
        } else if (k.loss.kind == LossKind::binary_crossentropy) {
          targets = random_values(total, ++seed, 0.0f, 1.0f);
          for (float& t : targets) t = t > 0.5f ? 1.0f : 0.0f;
        } else {
          targets = random_values(total, ++seed);
        }
        StepCounters start;
        start.loss_sum = 1.5;
        start.correct_sum = 2;
        start.sample_count = 3;
        Memory cm(*cpu_), gm(*gpu_);
        StepCounters* cc = cm.counters(start);
        StepCounters* gc = gm.counters(start);
        float* pc = outputs ? cm.poisoned(total) : nullptr;
        float* pg = outputs ? gm.poisoned(total) : nullptr;
        float* dc = outputs ? cm.poisoned(total) : nullptr;
        float* dg = outputs ? gm.poisoned(total) : nullptr;
        cpu_->loss_forward_backward(k.loss, k.act, cm.values(out), cm.values(targets), nullptr, pc,
                                    dc, m, c, cc, m);
        gpu_->loss_forward_backward(k.loss, k.act, gm.values(out), gm.values(targets), nullptr, pg,
                                    dg, m, c, gc, m);
        if (outputs) {
          expect_close(gm.get(pg, total), cm.get(pc, total), 1e-5, 1e-7, "probs");
          expect_close(gm.get(dg, total), cm.get(dc, total), 1e-4, 1e-7, "d_out");
        }
        const StepCounters want = cm.get_counters(cc), got = gm.get_counters(gc);
        EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::abs(want.loss_sum) + 1e-6);
        // Binary accuracy counts a fraction of each row's columns: sums of fractions that the two
        // devices add in different orders (seen on an H200: 17.6 against 17.6, a few ulps apart).
        // A whole sample miscounted is still a difference of at least 1 / c.
        EXPECT_NEAR(got.correct_sum, want.correct_sum, 1e-9 * std::abs(want.correct_sum));
        EXPECT_EQ(got.sample_count, want.sample_count);
      }
}

// Keras's weight regularizers: the penalty into loss_sum and its gradient into grad, as the CPU's;
// without a gradient (evaluate), the penalty alone.
TEST_F(CudaBackendTest, RegularizeMatchesCpu) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{70001}})
    for (bool gradient : {true, false}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (gradient ? " with grad" : " penalty only"));
      auto w = random_values(static_cast<std::size_t>(n), static_cast<uint32_t>(900 + n));
      w[0] = 0.0f;  // sign(0) = 0
      const auto g = random_values(static_cast<std::size_t>(n), static_cast<uint32_t>(901 + n));
      StepCounters start;
      start.loss_sum = 0.25;
      Memory cm(*cpu_), gm(*gpu_);
      StepCounters* cc = cm.counters(start);
      StepCounters* gc = gm.counters(start);
      float* gcpu = gradient ? cm.values(g) : nullptr;
      float* ggpu = gradient ? gm.values(g) : nullptr;
      cpu_->regularize(cm.values(w), gcpu, n, 0.03f, 0.2f, 0.0f, cc, 7);
      gpu_->regularize(gm.values(w), ggpu, n, 0.03f, 0.2f, 0.0f, gc, 7);
      if (gradient)
        expect_close(gm.get(ggpu, static_cast<std::size_t>(n)),
                     cm.get(gcpu, static_cast<std::size_t>(n)), 1e-6, 1e-7, "grad");
      const StepCounters want = cm.get_counters(cc), got = gm.get_counters(gc);
      EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-6 * std::abs(want.loss_sum));
    }
}

// ---- optimizer ----------------------------------------------------------------------------------

TEST_F(CudaBackendTest, OptimizerStepsMatchCpu) {
  struct Case {
    const char* name;
    OptimizerConfig config;
  };
  std::vector<Case> cases;
  cases.push_back({"adam", OptimizerConfig{}});
  {
    OptimizerConfig c;
    c.weight_decay = 0.01f;
    c.clipnorm = 0.5f;
    c.schedule = {1e-2f, 0.5f, 2, true};
    cases.push_back({"adam + weight decay + clipnorm + staircase schedule", c});
  }
  cases.push_back(
      {"sgd + smooth schedule", with_exponential_decay(SGD({.learning_rate = 0.1}), 3, 0.9)});
  cases.push_back(
      {"sgd nesterov + clipvalue",
       SGD({.learning_rate = 0.05, .momentum = 0.9, .nesterov = true, .clipvalue = 0.3})});
  cases.push_back({"rmsprop", RMSprop()});
  // clipnorm larger than the norm: factor 1.
  cases.push_back({"rmsprop + momentum", RMSprop({.momentum = 0.5, .clipnorm = 1e3})});
  cases.push_back({"lion + weight decay", Lion({.learning_rate = 0.01, .weight_decay = 0.1})});
  cases.push_back({"adam + per-tensor clipnorm", with_tensor_clipnorm(Adam({}), 0.05)});
  cases.push_back({"sgd momentum + per-tensor clipnorm",
                   with_tensor_clipnorm(SGD({.learning_rate = 0.1, .momentum = 0.9}), 0.05)});
  cases.push_back({"adagrad", Adagrad({.learning_rate = 0.01})});
  cases.push_back({"adadelta + clipvalue", Adadelta({.learning_rate = 1.0, .clipvalue = 0.5})});
  // start.step = 4 and carried.step 0: the kernel recomputes u_product once, then carries it.
  cases.push_back({"nadam", Nadam({.learning_rate = 0.01})});
  cases.push_back({"adamax + weight decay", Adamax({.learning_rate = 0.01, .weight_decay = 0.01})});
  // Slot 3 (v_hat) starts at random values, above v in some elements and below it in others.
  cases.push_back({"adam amsgrad", Adam({.learning_rate = 0.01, .amsgrad = true})});
  cases.push_back(
      {"adamw amsgrad + per-tensor clipnorm",
       with_tensor_clipnorm(AdamW({.learning_rate = 0.01, .weight_decay = 0.01, .amsgrad = true}),
                            0.05)});
  // Sizes that cross the kernel's chunk boundaries inside and between slots.
  const int64_t sizes[] = {97 * 13, 13, 300007, 1};
  uint32_t seed = 800;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Memory c(*cpu_), g(*gpu_);
    std::vector<ParamSlot> pc, pg;
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
      const int64_t n = sizes[i];
      const auto w = random_values(n, ++seed), grad = random_values(n, ++seed, -2.0f, 2.0f);
      // Slot 1 is RMSprop's mean square (never negative: a negative one made both devices' update
      // NaN, which no comparison passes) and Adam's or SGD's signed first moment or velocity.
      // Adagrad's and Adadelta's accumulators are never negative either.
      const bool square = k.config.kind == OptimizerKind::rmsprop ||
                          k.config.kind == OptimizerKind::adagrad ||
                          k.config.kind == OptimizerKind::adadelta;
      const float s1_low = square ? 0.0f : -0.1f;
      const auto s1 = random_values(n, ++seed, s1_low, 0.1f),
                 s2 = random_values(n, ++seed, 0.0f, 0.1f);
      ParamSlot a{c.values(w), c.values(grad), c.values(s1), c.values(s2), n, i % 2 == 0};
      ParamSlot b{g.values(w), g.values(grad), g.values(s1), g.values(s2), n, i % 2 == 0};
      if (optimizer_third_slot(k.config)) {
        const auto s3 = random_values(n, ++seed, 0.0f, 0.1f);
        a.slot3 = c.values(s3);
        b.slot3 = g.values(s3);
      }
      pc.push_back(a);
      pg.push_back(b);
    }
    StepCounters start;
    start.step = 4;
    start.batch_index = 9;
    StepCounters* cc = c.counters(start);
    StepCounters* gc = g.counters(start);
    for (int step = 0; step < 3; ++step) {
      cpu_->optimizer_step(k.config, pc, cc);
      gpu_->optimizer_step(k.config, pg, gc);
    }
    for (std::size_t i = 0; i < pc.size(); ++i) {
      const auto n = static_cast<std::size_t>(sizes[i]);
      SCOPED_TRACE("slot " + std::to_string(i));
      expect_close(g.get(pg[i].value, n), c.get(pc[i].value, n), 1e-5, 1e-6, "value");
      expect_close(g.get(pg[i].slot1, n), c.get(pc[i].slot1, n), 1e-5, 1e-7, "slot1");
      expect_close(g.get(pg[i].slot2, n), c.get(pc[i].slot2, n), 1e-5, 1e-7, "slot2");
      if (optimizer_third_slot(k.config))
        expect_close(g.get(pg[i].slot3, n), c.get(pc[i].slot3, n), 1e-5, 1e-7, "slot3");
    }
    const StepCounters want = c.get_counters(cc), got = g.get_counters(gc);
    EXPECT_EQ(got.step, want.step);
    EXPECT_EQ(got.batch_index, want.batch_index);
    EXPECT_FLOAT_EQ(got.learning_rate, want.learning_rate);
    EXPECT_NEAR(got.grad_scale, want.grad_scale, 1e-6);
    EXPECT_EQ(got.carried.step, want.carried.step);
    EXPECT_FLOAT_EQ(got.carried.value, want.carried.value);
  }
}

// Keras's AMSGrad on the GPU against the float64 evaluation of adam.py that the CPU's test uses
// (optimizer_test.cpp, keras_adam_reference.h): eight steps of a gradient that falls after two,
// so that v decreases and v_hat, its maximum, divides the step.
TEST_F(CudaBackendTest, AdamAmsgradFollowsKerasOverSeveralSteps) {
  const std::vector<double> w0{1.0, -2.0, 0.5, 0.0}, g0{0.1, -0.2, 0.3, 1e-3};
  for (const double beta_2 : {0.9, 0.999}) {
    SCOPED_TRACE("beta_2 " + std::to_string(beta_2));
    const OptimizerConfig config = Adam({.learning_rate = 0.1, .beta_2 = beta_2, .amsgrad = true});
    Memory g(*gpu_);
    const std::vector<float> zeros(4, 0.0f);
    const ParamSlot slot{g.values({1.0f, -2.0f, 0.5f, 0.0f}),
                         g.values(zeros),
                         g.values(zeros),
                         g.values(zeros),
                         4,
                         true,
                         g.values(zeros)};
    StepCounters* counters = g.counters(StepCounters{});
    testing_util::KerasAdamReference want{.lr = 0.1, .beta_2 = beta_2, .amsgrad = true, .w = w0};
    for (int t = 1; t <= 8; ++t) {
      std::vector<double> gt(4);
      std::vector<float> gf(4);
      for (std::size_t i = 0; i < 4; ++i)
        gf[i] = static_cast<float>(gt[i] = testing_util::falling_gradient(g0[i], t));
      gpu_->upload(slot.grad, gf.data(), gf.size() * sizeof(float));
      gpu_->optimizer_step(config, {&slot, 1}, counters);
      want.step(t, gt);
      const std::vector<float> w = g.get(slot.value, 4), v = g.get(slot.slot2, 4),
                               v_hat = g.get(slot.slot3, 4);
      for (std::size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE("step " + std::to_string(t) + ", element " + std::to_string(i));
        EXPECT_NEAR(w[i], want.w[i], 3e-6);
        EXPECT_NEAR(v_hat[i], want.v_hat[i], 1e-5 * want.v_hat[i]);
        EXPECT_GE(v_hat[i], v[i]);
      }
    }
    EXPECT_EQ(g.get_counters(counters).step, 8);
  }
}

TEST_F(CudaBackendTest, AdvanceBatchCountsOnTheDevice) {
  Memory g(*gpu_);
  StepCounters start;
  start.batch_index = 5;
  StepCounters* gc = g.counters(start);
  gpu_->advance_batch(gc);
  gpu_->advance_batch(gc);
  const StepCounters got = g.get_counters(gc);
  EXPECT_EQ(got.batch_index, 7);
  EXPECT_EQ(got.step, 0);
}

// ---- graphs -------------------------------------------------------------------------------------

// A two-layer training step with every kind of call the model makes, on buffers of one backend.
struct TinyModel {
  static constexpr int64_t kRows = 40, kIn = 20, kHidden = 16, kOut = 5, kBatch = 8;
  static constexpr float kRate = 0.25f;

  TinyModel(Memory& mem, int64_t m) : mem_(mem), b_(mem.backend()), m_(m) {
    data = mem.values(random_values(kRows * kIn, 900));
    labels = mem.values(random_labels(kRows, kOut, 901));
    std::vector<int32_t> order(kRows);
    for (int64_t i = 0; i < kRows; ++i) order[i] = static_cast<int32_t>((i * 7 + 3) % kRows);
    indices = mem.alloc<int32_t>(kRows);
    b_.upload(indices, order.data(), kRows * sizeof(int32_t));
    counters = mem.counters(StepCounters{});
    w1 = mem.values(random_values(kIn * kHidden, 902, -0.4f, 0.4f));
    b1 = mem.values(random_values(kHidden, 903, -0.1f, 0.1f));
    w2 = mem.values(random_values(kHidden * kOut, 904, -0.4f, 0.4f));
    b2 = mem.values(random_values(kOut, 905, -0.1f, 0.1f));
    for (float** p : {&x, &y, &h, &hd, &z, &probs, &dz, &dhd, &dh, &dw1, &db1, &dw2, &db2})
      *p = mem.alloc<float>(kRows * kIn);
    mask = mem.alloc<uint8_t>(kBatch * kHidden);
    float* params[] = {w1, b1, w2, b2};
    float* grads[] = {dw1, db1, dw2, db2};
    const int64_t sizes[] = {kIn * kHidden, kHidden, kHidden * kOut, kOut};
    for (int i = 0; i < 4; ++i)
      slots.push_back({params[i], grads[i], mem.alloc<float>(sizes[i]), mem.alloc<float>(sizes[i]),
                       sizes[i], i % 2 == 0});
  }

  void step() {
    b_.gather_rows(data, kIn, indices, kBatch, counters, m_, x);
    b_.gather_rows(labels, 1, indices, kBatch, counters, m_, y);
    b_.dense_forward(x, w1, b1, h, m_, kIn, kHidden, ActivationKind::relu);
    b_.dropout_forward(h, hd, mask, m_, kHidden, kRate, 77, 1, counters, 0);
    b_.dense_forward(hd, w2, b2, z, m_, kHidden, kOut, ActivationKind::linear);
    b_.loss_forward_backward(LossKind::sparse_categorical_crossentropy, ActivationKind::softmax, z,
                             y, nullptr, probs, dz, m_, kOut, counters, m_);
    b_.dense_backward_weights(hd, dz, dw2, db2, m_, kHidden, kOut);
    b_.dense_backward_input(dz, w2, dhd, m_, kHidden, kOut);
    b_.relu_dropout_backward(hd, mask, dhd, dh, m_, kHidden, kRate);
    b_.dense_backward_weights(x, dh, dw1, db1, m_, kIn, kHidden);
    b_.optimizer_step(OptimizerConfig{}, slots, counters);
  }

  Memory& mem_;
  Backend& b_;
  int64_t m_;
  float *data, *labels, *x, *y, *h, *hd, *z, *probs, *dz, *dhd, *dh;
  float *w1, *b1, *w2, *b2, *dw1, *db1, *dw2, *db2;
  int32_t* indices;
  uint8_t* mask;
  StepCounters* counters;
  std::vector<ParamSlot> slots;
};

TEST_F(CudaBackendTest, CapturedGraphMatchesEagerCallsAndTheCpu) {
  for (int64_t m : {TinyModel::kBatch, int64_t{7}}) {  // full batch, and a ragged last batch
    SCOPED_TRACE("m=" + std::to_string(m));
    auto gpu2 = make_cuda_backend(0);
    Memory gm(*gpu_), em(*gpu2), cm(*cpu_);
    TinyModel graphed(gm, m), eager(em, m), reference(cm, m);
    auto g = gpu_->capture([&] { graphed.step(); }, true);
    auto e = gpu2->capture([&] { eager.step(); }, false);
    // Capturing runs nothing.
    EXPECT_EQ(gm.get_counters(graphed.counters).step, 0);
    for (int i = 0; i < 5; ++i) {
      g->replay();
      e->replay();
      reference.step();
    }
    gpu_->synchronize();
    const StepCounters cg = gm.get_counters(graphed.counters), ce = em.get_counters(eager.counters),
                       cc = cm.get_counters(reference.counters);
    EXPECT_EQ(cg.step, 5);
    EXPECT_EQ(cg.batch_index, 5);
    EXPECT_EQ(cg.sample_count, 5.0 * m);
    EXPECT_EQ(ce.step, cg.step);
    EXPECT_EQ(cg.correct_sum, ce.correct_sum);
    EXPECT_NEAR(cg.loss_sum, ce.loss_sum, 1e-9 * std::abs(ce.loss_sum));
    EXPECT_NEAR(cg.loss_sum, cc.loss_sum, 1e-4 * std::abs(cc.loss_sum));
    EXPECT_EQ(cg.correct_sum, cc.correct_sum);
    const std::pair<float*, int64_t> gp[] = {{graphed.w1, TinyModel::kIn * TinyModel::kHidden},
                                             {graphed.b1, TinyModel::kHidden},
                                             {graphed.w2, TinyModel::kHidden * TinyModel::kOut},
                                             {graphed.b2, TinyModel::kOut}};
    float* ep[] = {eager.w1, eager.b1, eager.w2, eager.b2};
    float* cp[] = {reference.w1, reference.b1, reference.w2, reference.b2};
    for (int i = 0; i < 4; ++i) {
      const auto n = static_cast<std::size_t>(gp[i].second);
      const auto got = gm.get(gp[i].first, n);
      expect_close(got, em.get(ep[i], n), 1e-6, 1e-7, "graph vs eager param " + std::to_string(i));
      expect_close(got, cm.get(cp[i], n), 1e-3, 1e-4, "graph vs cpu param " + std::to_string(i));
    }
  }
}

TEST_F(CudaBackendTest, CaptureRunsNothingAndEachReplayRunsOnce) {
  Memory g(*gpu_);
  StepCounters* c = g.counters(StepCounters{});
  for (bool use_graph : {true, false}) {
    SCOPED_TRACE(use_graph ? "graph" : "naive");
    const int64_t before = g.get_counters(c).batch_index;
    auto graph = gpu_->capture([&] { gpu_->advance_batch(c); }, use_graph);
    EXPECT_EQ(g.get_counters(c).batch_index, before);
    graph->replay();
    graph->replay();
    gpu_->synchronize();
    EXPECT_EQ(g.get_counters(c).batch_index, before + 2);
  }
}

TEST_F(CudaBackendTest, ACallNotSeenWhilePlanningIsAnErrorDuringCapture) {
  // A function that does not make the same calls every time: the second (captured) pass meets a
  // product shape the planning pass did not make a plan for.
  Memory g(*gpu_);
  float* x = g.alloc<float>(64);
  float* w = g.alloc<float>(64);
  float* y = g.alloc<float>(64);
  int calls = 0;
  EXPECT_THROW(gpu_->capture(
                   [&] {
                     const int64_t k = ++calls == 1 ? 3 : 5;
                     gpu_->dense_forward(x, w, nullptr, y, 2, k, 4, ActivationKind::linear);
                   },
                   true),
               Error);
  // The stream is usable afterwards.
  gpu_->dense_forward(x, w, nullptr, y, 2, 5, 4, ActivationKind::linear);
  gpu_->synchronize();
}

// ---- convolution and pooling (cuDNN and conv_pool_kernels.cu) against the CPU's oneDNN ------

// The fixture of the convolution and pooling tests (named apart so that a GPU run can pick them).
class CudaConvTest : public CudaBackendTest {};

// A ConvShape (or the matching PoolShape's window) placed as Keras places it: 'valid', or 'same'
// with TensorFlow's split (the odd row and column of padding at the bottom and right).
struct Placed {
  int64_t out_h, out_w, top, bottom, left, right;
};
Placed place(int64_t in_h, int64_t in_w, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
             bool same) {
  Placed p{};
  auto one = [same](int64_t in, int64_t k, int64_t stride, int64_t& out, int64_t& lo, int64_t& hi) {
    if (!same) {
      out = (in - k) / stride + 1;
      lo = hi = 0;
      return;
    }
    out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((out - 1) * stride + k - in, 0);
    lo = total / 2;
    hi = total - lo;
  };
  one(in_h, kh, sh, p.out_h, p.top, p.bottom);
  one(in_w, kw, sw, p.out_w, p.left, p.right);
  return p;
}

// dh, dw: the kernel's dilation, placed as its span (k - 1) * d + 1.
ConvShape conv_shape(int64_t in_h, int64_t in_w, int64_t in_c, int64_t out_c, int64_t kh,
                     int64_t kw, int64_t sh, int64_t sw, bool same, int64_t dh = 1,
                     int64_t dw = 1) {
  const Placed p = place(in_h, in_w, (kh - 1) * dh + 1, (kw - 1) * dw + 1, sh, sw, same);
  return {.in_h = in_h,
          .in_w = in_w,
          .in_c = in_c,
          .out_h = p.out_h,
          .out_w = p.out_w,
          .out_c = out_c,
          .kernel_h = kh,
          .kernel_w = kw,
          .stride_h = sh,
          .stride_w = sw,
          .pad_top = p.top,
          .pad_left = p.left,
          .pad_bottom = p.bottom,
          .pad_right = p.right,
          .dilation_h = dh,
          .dilation_w = dw};
}

PoolShape pool_shape(PoolKind kind, int64_t in_h, int64_t in_w, int64_t c, int64_t window,
                     int64_t stride, bool same) {
  const Placed p = place(in_h, in_w, window, window, stride, stride, same);
  return {.kind = kind,
          .in_h = in_h,
          .in_w = in_w,
          .channels = c,
          .out_h = p.out_h,
          .out_w = p.out_w,
          .window_h = window,
          .window_w = window,
          .stride_h = stride,
          .stride_w = stride,
          .pad_top = p.top,
          .pad_left = p.left,
          .pad_bottom = p.bottom,
          .pad_right = p.right};
}

std::string conv_name(const ConvShape& s, int64_t m) {
  return "m=" + std::to_string(m) + " in " + std::to_string(s.in_h) + "x" + std::to_string(s.in_w) +
         "x" + std::to_string(s.in_c) + " kernel " + std::to_string(s.kernel_h) + "x" +
         std::to_string(s.kernel_w) + " dilation " + std::to_string(s.dilation_h) + "x" +
         std::to_string(s.dilation_w) + " stride " + std::to_string(s.stride_h) + "x" +
         std::to_string(s.stride_w) + " pad t" + std::to_string(s.pad_top) + " b" +
         std::to_string(s.pad_bottom) + " l" + std::to_string(s.pad_left) + " r" +
         std::to_string(s.pad_right) + " -> " + std::to_string(s.out_h) + "x" +
         std::to_string(s.out_w) + "x" + std::to_string(s.out_c);
}

struct ConvCase {
  int64_t m;
  ConvShape shape;
};
// Valid; 'same' with symmetric padding (cuDNN's own); 'same' with the uneven split (the explicit
// padded copy) at strides 1 and 2; an unequal kernel and strides; the MNIST convnet's layers;
// dilated kernels (Keras's dilation_rate): valid at (2, 3), 'same' symmetric at 2 and uneven (a
// 3x2 kernel at (2, 3) spans 5x4).
std::vector<ConvCase> conv_cases() {
  return {{5, conv_shape(9, 8, 3, 7, 3, 3, 1, 1, false)},
          {3, conv_shape(7, 9, 2, 5, 3, 3, 1, 1, true)},
          {4, conv_shape(8, 8, 3, 6, 3, 3, 2, 2, true)},
          {3, conv_shape(7, 7, 2, 4, 2, 4, 1, 1, true)},
          {2, conv_shape(9, 11, 3, 5, 3, 2, 2, 3, false)},
          {7, conv_shape(28, 28, 1, 32, 3, 3, 1, 1, false)},
          {7, conv_shape(13, 13, 32, 64, 3, 3, 1, 1, false)},
          {3, conv_shape(9, 11, 3, 4, 3, 3, 1, 1, false, 2, 3)},
          {3, conv_shape(8, 7, 2, 5, 3, 3, 1, 1, true, 2, 2)},
          {2, conv_shape(7, 6, 3, 4, 3, 2, 1, 1, true, 2, 3)}};
}

TEST_F(CudaConvTest, Conv2dForwardMatchesCpuWithBiasAndFusedRelu) {
  uint32_t seed = 1000;
  for (const auto& [m, s] : conv_cases())
    for (ActivationKind act : {ActivationKind::linear, ActivationKind::relu})
      for (bool bias : {true, false}) {
        SCOPED_TRACE(conv_name(s, m) + " " + std::string(activation_name(act)) +
                     (bias ? " bias" : " no bias"));
        const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.in_c),
                   nw = static_cast<std::size_t>(s.kernel_h * s.kernel_w * s.in_c * s.out_c),
                   ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.out_c);
        const auto x = random_values(nx, ++seed), w = random_values(nw, ++seed),
                   b = random_values(static_cast<std::size_t>(s.out_c), ++seed);
        Memory c(*cpu_), g(*gpu_);
        float* yc = c.poisoned(ny);
        float* yg = g.poisoned(ny);
        cpu_->conv2d_forward(s, c.values(x), c.values(w), bias ? c.values(b) : nullptr, yc, m, act);
        gpu_->conv2d_forward(s, g.values(x), g.values(w), bias ? g.values(b) : nullptr, yg, m, act);
        const auto got = g.get(yg, ny), want = c.get(yc, ny);
        EXPECT_LE(relative_error(got, want), 1e-4);
        if (act == ActivationKind::relu) {
          EXPECT_EQ(*std::min_element(got.begin(), got.end()), 0.0f);
        }
      }
}

TEST_F(CudaConvTest, Conv2dBackwardInputMatchesCpu) {
  uint32_t seed = 2000;
  for (const auto& [m, s] : conv_cases()) {
    SCOPED_TRACE(conv_name(s, m));
    const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.in_c),
               nw = static_cast<std::size_t>(s.kernel_h * s.kernel_w * s.in_c * s.out_c),
               ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.out_c);
    const auto dy = random_values(ny, ++seed), w = random_values(nw, ++seed);
    Memory c(*cpu_), g(*gpu_);
    float* dxc = c.poisoned(nx);
    float* dxg = g.poisoned(nx);
    cpu_->conv2d_backward_input(s, c.values(dy), c.values(w), dxc, m);
    gpu_->conv2d_backward_input(s, g.values(dy), g.values(w), dxg, m);
    EXPECT_LE(relative_error(g.get(dxg, nx), c.get(dxc, nx)), 1e-4);
  }
}

TEST_F(CudaConvTest, Conv2dBackwardWeightsMatchesCpuWithAndWithoutBias) {
  uint32_t seed = 3000;
  for (const auto& [m, s] : conv_cases())
    for (bool bias : {true, false}) {
      SCOPED_TRACE(conv_name(s, m) + (bias ? " with db" : " without db"));
      const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.in_c),
                 nw = static_cast<std::size_t>(s.kernel_h * s.kernel_w * s.in_c * s.out_c),
                 ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.out_c),
                 nb = static_cast<std::size_t>(s.out_c);
      const auto x = random_values(nx, ++seed), dy = random_values(ny, ++seed);
      Memory c(*cpu_), g(*gpu_);
      float* dwc = c.poisoned(nw);
      float* dwg = g.poisoned(nw);
      float* dbc = bias ? c.poisoned(nb) : nullptr;
      float* dbg = bias ? g.poisoned(nb) : nullptr;
      cpu_->conv2d_backward_weights(s, c.values(x), c.values(dy), dwc, dbc, m);
      gpu_->conv2d_backward_weights(s, g.values(x), g.values(dy), dwg, dbg, m);
      EXPECT_LE(relative_error(g.get(dwg, nw), c.get(dwc, nw)), 1e-4) << "dw";
      if (bias) {
        EXPECT_LE(relative_error(g.get(dbg, nb), c.get(dbc, nb)), 1e-4) << "db";
      }
    }
}

// Conv2DTranspose's calls (backend_ops.h: s is the convolution it transposes, its forward that
// convolution's input gradient plus a bias), on the same shapes.
TEST_F(CudaConvTest, Conv2dTransposeCallsMatchCpu) {
  uint32_t seed = 3500;
  for (const auto& [m, s] : conv_cases()) {
    SCOPED_TRACE(conv_name(s, m));
    const auto nx = static_cast<std::size_t>(m * s.out_h * s.out_w * s.out_c),
               nw = static_cast<std::size_t>(s.kernel_h * s.kernel_w * s.in_c * s.out_c),
               ny = static_cast<std::size_t>(m * s.in_h * s.in_w * s.in_c),
               nb = static_cast<std::size_t>(s.in_c);
    const auto x = random_values(nx, ++seed), w = random_values(nw, ++seed),
               b = random_values(nb, ++seed), dy = random_values(ny, ++seed);
    Memory c(*cpu_), g(*gpu_);
    float* yc = c.poisoned(ny);
    float* yg = g.poisoned(ny);
    float* dxc = c.poisoned(nx);
    float* dxg = g.poisoned(nx);
    float* dwc = c.poisoned(nw);
    float* dwg = g.poisoned(nw);
    float* dbc = c.poisoned(nb);
    float* dbg = g.poisoned(nb);
    cpu_->conv2d_transpose_forward(s, c.values(x), c.values(w), c.values(b), yc, m);
    gpu_->conv2d_transpose_forward(s, g.values(x), g.values(w), g.values(b), yg, m);
    cpu_->conv2d_transpose_backward_input(s, c.values(dy), c.values(w), dxc, m);
    gpu_->conv2d_transpose_backward_input(s, g.values(dy), g.values(w), dxg, m);
    cpu_->conv2d_transpose_backward_weights(s, c.values(x), c.values(dy), dwc, dbc, m);
    gpu_->conv2d_transpose_backward_weights(s, g.values(x), g.values(dy), dwg, dbg, m);
    EXPECT_LE(relative_error(g.get(yg, ny), c.get(yc, ny)), 1e-4) << "y";
    EXPECT_LE(relative_error(g.get(dxg, nx), c.get(dxc, nx)), 1e-4) << "dx";
    EXPECT_LE(relative_error(g.get(dwg, nw), c.get(dwc, nw)), 1e-4) << "dw";
    EXPECT_LE(relative_error(g.get(dbg, nb), c.get(dbc, nb)), 1e-4) << "db";
  }
}

TEST_F(CudaConvTest, Conv2dRefusesAnActivationItCannotFuse) {
  Memory g(*gpu_);
  const ConvShape s = conv_shape(5, 5, 1, 2, 3, 3, 1, 1, false);
  float* x = g.alloc<float>(25);
  float* w = g.alloc<float>(18);
  float* y = g.alloc<float>(18);
  EXPECT_THROW(gpu_->conv2d_forward(s, x, w, nullptr, y, 1, ActivationKind::sigmoid), Error);
}

std::string pool_name(const PoolShape& s, int64_t m) {
  return std::string(s.kind == PoolKind::max ? "max" : "average") + " m=" + std::to_string(m) +
         " in " + std::to_string(s.in_h) + "x" + std::to_string(s.in_w) + "x" +
         std::to_string(s.channels) + " window " + std::to_string(s.window_h) + "x" +
         std::to_string(s.window_w) + " stride " + std::to_string(s.stride_h) + " pad t" +
         std::to_string(s.pad_top) + " b" + std::to_string(s.pad_bottom) + " -> " +
         std::to_string(s.out_h) + "x" + std::to_string(s.out_w);
}

// Forward and backward of one pooling shape on both backends, from x and dy.
void expect_pool_matches(Backend& cpu, Backend& gpu, const PoolShape& s, int64_t m,
                         const std::vector<float>& x, const std::vector<float>& dy, double tol) {
  const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.channels),
             ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels);
  Memory c(cpu), g(gpu);
  const bool max = s.kind == PoolKind::max;
  const std::size_t wc_bytes = max ? cpu.pool2d_workspace_bytes(s, m) : 0,
                    wg_bytes = max ? gpu.pool2d_workspace_bytes(s, m) : 0;
  void* wc = max ? c.alloc<unsigned char>(wc_bytes) : nullptr;
  void* wg = max ? g.alloc<unsigned char>(wg_bytes) : nullptr;
  float* yc = c.poisoned(ny);
  float* yg = g.poisoned(ny);
  cpu.pool2d_forward(s, c.values(x), yc, wc, m);
  gpu.pool2d_forward(s, g.values(x), yg, wg, m);
  EXPECT_LE(relative_error(g.get(yg, ny), c.get(yc, ny)), tol) << "y";
  // The forward of evaluate and predict (no workspace) gives the same values.
  float* yg2 = g.poisoned(ny);
  gpu.pool2d_forward(s, g.values(x), yg2, nullptr, m);
  EXPECT_EQ(g.get(yg2, ny), g.get(yg, ny)) << "y without a workspace";
  float* dxc = c.poisoned(nx);
  float* dxg = g.poisoned(nx);
  cpu.pool2d_backward(s, c.values(dy), wc, dxc, m);
  gpu.pool2d_backward(s, g.values(dy), wg, dxg, m);
  EXPECT_LE(relative_error(g.get(dxg, nx), c.get(dxc, nx)), tol) << "dx";
}

TEST_F(CudaConvTest, PoolingMatchesCpuForwardAndBackward) {
  uint32_t seed = 4000;
  for (PoolKind kind : {PoolKind::max, PoolKind::average}) {
    const PoolShape shapes[] = {
        pool_shape(kind, 26, 26, 32, 2, 2, false),  // the convnet's first pooling
        pool_shape(kind, 11, 11, 64, 2, 2, false),  // its second: the odd last row is dropped
        pool_shape(kind, 13, 13, 3, 2, 2, true),    // 'same', uneven: one padded row and column
        pool_shape(kind, 9, 10, 4, 3, 2, false),    // overlapping windows
        pool_shape(kind, 8, 7, 2, 3, 2, true),      // overlapping and padded on both sides
        pool_shape(kind, 5, 5, 3, 3, 1, true),      // stride 1, 'same'
    };
    for (const PoolShape& s : shapes)
      for (int64_t m : {int64_t{3}, int64_t{1}}) {
        SCOPED_TRACE(pool_name(s, m));
        const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.channels),
                   ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels);
        const auto x = random_values(nx, ++seed), dy = random_values(ny, ++seed);
        expect_pool_matches(*cpu_, *gpu_, s, m, x, dy, 1e-6);
      }
  }
}

TEST_F(CudaConvTest, MaxPoolingSendsTheGradientOfATieWhereTheCpuDoes) {
  // Values from {0, 1, 2}: most windows hold their maximum more than once. The gradient must go
  // to the same element of each window as on the CPU (the first in row-major order), not be
  // split or sent to another.
  uint32_t seed = 5000;
  for (const PoolShape& s : {pool_shape(PoolKind::max, 8, 8, 3, 2, 2, false),
                             pool_shape(PoolKind::max, 9, 9, 2, 3, 2, true),
                             pool_shape(PoolKind::max, 7, 6, 2, 3, 1, true)}) {
    SCOPED_TRACE(pool_name(s, 4));
    const int64_t m = 4;
    auto x = random_values(static_cast<std::size_t>(m * s.in_h * s.in_w * s.channels), ++seed, 0.0f,
                           3.0f);
    for (float& v : x) v = std::floor(v);
    // Distinct gradients, so that one sent to the wrong element shows.
    const auto dy = random_values(static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels),
                                  ++seed, 1.0f, 2.0f);
    expect_pool_matches(*cpu_, *gpu_, s, m, x, dy, 1e-6);
  }
}

TEST_F(CudaConvTest, GlobalAveragePoolingMatchesCpu) {
  const int64_t m = 5, h = 7, w = 6, c = 9;
  const PoolShape s{.kind = PoolKind::average,
                    .in_h = h,
                    .in_w = w,
                    .channels = c,
                    .out_h = 1,
                    .out_w = 1,
                    .window_h = h,
                    .window_w = w,
                    .stride_h = h,
                    .stride_w = w};
  expect_pool_matches(*cpu_, *gpu_, s, m, random_values(static_cast<std::size_t>(m * h * w * c), 1),
                      random_values(static_cast<std::size_t>(m * c), 2), 1e-6);
}

TEST_F(CudaConvTest, ConvolutionsAndPoolingInACapturedGraphMatchEagerCalls) {
  // A convnet's forward and backward, with the uneven 'same' padding's explicit copy: captured
  // (after the planning pass made the cuDNN plans) and replayed, against the same calls made
  // eagerly on another backend.
  const int64_t m = 6;
  const ConvShape cs = conv_shape(10, 10, 2, 4, 3, 3, 2, 2, true);
  const PoolShape ps = pool_shape(PoolKind::max, cs.out_h, cs.out_w, cs.out_c, 2, 2, true);
  const auto nx = static_cast<std::size_t>(m * cs.in_h * cs.in_w * cs.in_c),
             nw = static_cast<std::size_t>(3 * 3 * cs.in_c * cs.out_c),
             ny = static_cast<std::size_t>(m * cs.out_h * cs.out_w * cs.out_c),
             np = static_cast<std::size_t>(m * ps.out_h * ps.out_w * ps.channels);
  const auto x = random_values(nx, 61), w = random_values(nw, 62),
             b = random_values(static_cast<std::size_t>(cs.out_c), 63), dp = random_values(np, 64);
  struct Step {
    float *x, *w, *b, *y, *p, *dp, *dy, *dx, *dw, *db;
    void* ws;
  };
  auto make = [&](Memory& mem) {
    Backend& be = mem.backend();
    return Step{mem.values(x),
                mem.values(w),
                mem.values(b),
                mem.poisoned(ny),
                mem.poisoned(np),
                mem.values(dp),
                mem.poisoned(ny),
                mem.poisoned(nx),
                mem.poisoned(nw),
                mem.poisoned(static_cast<std::size_t>(cs.out_c)),
                mem.alloc<unsigned char>(be.pool2d_workspace_bytes(ps, m))};
  };
  auto run = [&](Backend& be, const Step& s) {
    be.conv2d_forward(cs, s.x, s.w, s.b, s.y, m, ActivationKind::relu);
    be.pool2d_forward(ps, s.y, s.p, s.ws, m);
    be.pool2d_backward(ps, s.dp, s.ws, s.dy, m);
    be.activation_backward(ActivationKind::relu, 0.0f, nullptr, s.y, s.dy, s.dy, m,
                           cs.out_h * cs.out_w * cs.out_c);
    be.conv2d_backward_input(cs, s.dy, s.w, s.dx, m);
    be.conv2d_backward_weights(cs, s.x, s.dy, s.dw, s.db, m);
  };
  auto gpu2 = make_cuda_backend(0);
  Memory gm(*gpu_), em(*gpu2);
  const Step gs = make(gm), es = make(em);
  auto graph = gpu_->capture([&] { run(*gpu_, gs); }, true);
  auto eager = gpu2->capture([&] { run(*gpu2, es); }, false);
  graph->replay();
  eager->replay();
  for (auto [got, want, n, what] :
       {std::tuple{gs.y, es.y, ny, "y"}, std::tuple{gs.p, es.p, np, "pooled"},
        std::tuple{gs.dx, es.dx, nx, "dx"}, std::tuple{gs.dw, es.dw, nw, "dw"},
        std::tuple{gs.db, es.db, static_cast<std::size_t>(cs.out_c), "db"}})
    expect_close(gm.get(got, n), em.get(want, n), 1e-6, 1e-7,
                 std::string("graph vs eager ") + what);
}

TEST_F(CudaConvTest, ADifferentConvolutionWhileCapturingIsAnError) {
  Memory g(*gpu_);
  float* x = g.alloc<float>(256);
  float* w = g.alloc<float>(256);
  float* y = g.alloc<float>(256);
  int calls = 0;
  EXPECT_THROW(gpu_->capture(
                   [&] {
                     const int64_t in = ++calls == 1 ? 5 : 6;
                     gpu_->conv2d_forward(conv_shape(in, in, 1, 2, 3, 3, 1, 1, false), x, w,
                                          nullptr, y, 1, ActivationKind::linear);
                   },
                   true),
               Error);
  gpu_->conv2d_forward(conv_shape(6, 6, 1, 2, 3, 3, 1, 1, false), x, w, nullptr, y, 1,
                       ActivationKind::linear);
  gpu_->synchronize();
}

TEST_F(CudaConvTest, DropoutAfterTheConvnetsFlattenDrawsTheCpuMask) {
  // The convnet's Dropout(0.5) sees (batch, 1600): the masks of both devices are bit-identical.
  const int64_t m = 32, n = 1600;
  const auto x = random_values(static_cast<std::size_t>(m * n), 71);
  Memory c(*cpu_), g(*gpu_);
  StepCounters start;
  start.step = 17;
  uint8_t* mc = c.alloc<uint8_t>(static_cast<std::size_t>(m * n));
  uint8_t* mg = g.alloc<uint8_t>(static_cast<std::size_t>(m * n));
  float* yc = c.poisoned(static_cast<std::size_t>(m * n));
  float* yg = g.poisoned(static_cast<std::size_t>(m * n));
  cpu_->dropout_forward(c.values(x), yc, mc, m, n, 0.5f, 3, 6, c.counters(start), 0);
  gpu_->dropout_forward(g.values(x), yg, mg, m, n, 0.5f, 3, 6, g.counters(start), 0);
  EXPECT_EQ(g.get_raw(mg, static_cast<std::size_t>(m * n)),
            c.get_raw(mc, static_cast<std::size_t>(m * n)));
  EXPECT_EQ(g.get(yg, static_cast<std::size_t>(m * n)), c.get(yc, static_cast<std::size_t>(m * n)));
}

// ---- batch normalization (crossover's own kernels) against the CPU's oneDNN
// ----------------------

// ---- layer normalization: a warp per row (norm_kernels.cu) against the CPU's loops ----

TEST_F(CudaBackendTest, LayerNormForwardAndBackwardMatchCpu) {
  struct Case {
    int64_t rows, n;
    bool affine;
  };
  uint32_t seed = 7000;
  // Shorter than a warp, not a multiple of 32, wider than a block; more rows than the grid's
  // warps (grid-stride); no gamma and beta.
  for (const Case& k : {Case{7, 13, true}, Case{33, 70, true}, Case{5, 1000, true},
                        Case{200000, 8, true}, Case{64, 37, false}}) {
    SCOPED_TRACE(std::to_string(k.rows) + "x" + std::to_string(k.n) + (k.affine ? " affine" : ""));
    const auto n = static_cast<std::size_t>(k.rows * k.n), w = static_cast<std::size_t>(k.n),
               r = static_cast<std::size_t>(k.rows);
    auto x = random_values(n, seed += 10, -2.0f, 4.0f);
    const auto gamma = random_values(w, seed + 1, 0.5f, 1.5f), beta = random_values(w, seed + 2),
               dy = random_values(n, seed + 3);
    Memory c(*cpu_), g(*gpu_);
    float *yc = c.poisoned(n), *mc = c.poisoned(r), *rc = c.poisoned(r);
    float *yg = g.poisoned(n), *mg = g.poisoned(r), *rg = g.poisoned(r);
    cpu_->layernorm_forward(c.values(x), k.affine ? c.values(gamma) : nullptr,
                            k.affine ? c.values(beta) : nullptr, yc, mc, rc, k.rows, k.n, 1e-3f);
    gpu_->layernorm_forward(g.values(x), k.affine ? g.values(gamma) : nullptr,
                            k.affine ? g.values(beta) : nullptr, yg, mg, rg, k.rows, k.n, 1e-3f);
    expect_close(g.get(mg, r), c.get(mc, r), 1e-5, 1e-5, "mean");
    expect_close(g.get(rg, r), c.get(rc, r), 1e-5, 1e-5, "rstd");
    expect_close(g.get(yg, n), c.get(yc, n), 1e-4, 1e-4, "y");
    // The backward from the CPU's statistics on both.
    const auto mean = c.get(mc, r), rstd = c.get(rc, r);
    float *dxc = c.poisoned(n), *dgc = k.affine ? c.poisoned(w) : nullptr,
          *dbc = k.affine ? c.poisoned(w) : nullptr;
    float *dxg = g.poisoned(n), *dgg = k.affine ? g.poisoned(w) : nullptr,
          *dbg = k.affine ? g.poisoned(w) : nullptr;
    cpu_->layernorm_backward(c.values(x), c.values(dy), k.affine ? c.values(gamma) : nullptr,
                             c.values(mean), c.values(rstd), dxc, dgc, dbc, k.rows, k.n);
    gpu_->layernorm_backward(g.values(x), g.values(dy), k.affine ? g.values(gamma) : nullptr,
                             g.values(mean), g.values(rstd), dxg, dgg, dbg, k.rows, k.n);
    EXPECT_LE(relative_error(g.get(dxg, n), c.get(dxc, n)), 1e-4) << "dx";
    if (k.affine) {
      EXPECT_LE(relative_error(g.get(dgg, w), c.get(dgc, w)), 1e-4) << "dgamma";
      EXPECT_LE(relative_error(g.get(dbg, w), c.get(dbc, w)), 1e-4) << "dbeta";
    }
  }
}

// ---- nearest-neighbour upsampling (conv_pool_kernels.cu) against the CPU's copies and sums ----

TEST_F(CudaBackendTest, UpsampleForwardAndBackwardMatchCpu) {
  uint32_t seed = 7100;
  for (const std::array<int64_t, 6> k :
       {std::array<int64_t, 6>{2, 3, 5, 3, 2, 3}, {64, 14, 14, 16, 2, 2}, {1, 1, 1, 1, 4, 1}}) {
    PoolShape s;
    s.in_h = k[1], s.in_w = k[2], s.channels = k[3];
    s.window_h = s.stride_h = k[4], s.window_w = s.stride_w = k[5];
    s.out_h = s.in_h * k[4], s.out_w = s.in_w * k[5];
    const int64_t m = k[0];
    const auto nx = static_cast<std::size_t>(m * s.in_h * s.in_w * s.channels),
               ny = static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels);
    const auto x = random_values(nx, seed += 10), dy = random_values(ny, seed + 1);
    Memory c(*cpu_), g(*gpu_);
    float *yc = c.poisoned(ny), *yg = g.poisoned(ny), *dxc = c.poisoned(nx), *dxg = g.poisoned(nx);
    cpu_->upsample2d_forward(s, c.values(x), yc, m);
    gpu_->upsample2d_forward(s, g.values(x), yg, m);
    EXPECT_EQ(g.get(yg, ny), c.get(yc, ny));
    cpu_->upsample2d_backward(s, c.values(dy), dxc, m);
    gpu_->upsample2d_backward(s, g.values(dy), dxg, m);
    expect_close(g.get(dxg, nx), c.get(dxc, nx), 1e-6, 1e-6, "dx");
  }
}

// ---- permuting each sample's axes (kernels.cu) against the CPU's copies ----

TEST_F(CudaBackendTest, PermuteAndItsInverseMatchCpu) {
  uint32_t seed = 7200;
  struct Case {
    int64_t m;
    std::vector<int64_t> in;
    std::vector<int> perm;
  };
  for (const Case& k : std::vector<Case>{{64, {28, 28}, {1, 0}},
                                         {3, {5, 4, 3}, {2, 0, 1}},
                                         {3, {5, 4, 3}, {1, 0, 2}},
                                         {2, {2, 3, 4, 5}, {3, 0, 2, 1}},
                                         {5, {7}, {0}}}) {
    PermuteShape s;
    s.rank = static_cast<int>(k.in.size());
    for (int i = 0; i < s.rank; ++i)
      s.in[i] = k.in[static_cast<std::size_t>(i)], s.perm[i] = k.perm[static_cast<std::size_t>(i)];
    const auto n = static_cast<std::size_t>(k.m * permute_values(s));
    const auto x = random_values(n, seed += 10);
    Memory c(*cpu_), g(*gpu_);
    float *yc = c.poisoned(n), *yg = g.poisoned(n), *back = g.poisoned(n);
    const float* xg = g.values(x);
    cpu_->permute(s, c.values(x), yc, k.m);
    gpu_->permute(s, xg, yg, k.m);
    EXPECT_EQ(g.get(yg, n), c.get(yc, n));
    gpu_->permute(inverse_permutation(s), yg, back, k.m);
    EXPECT_EQ(g.get(back, n), x);
  }
}

// Every op with every broadcast of each operand (a null operand: the shape's constant), and the
// row sums: the CPU's arithmetic, summed in the CPU's order.
TEST_F(CudaBackendTest, ElementWiseOpsWithBroadcastingAndRowSumsMatchCpu) {
  uint32_t seed = 7300;
  const int64_t rows = 37, cols = 13;
  const auto n = static_cast<std::size_t>(rows * cols);
  for (BinaryOp op : {BinaryOp::add, BinaryOp::subtract, BinaryOp::multiply, BinaryOp::divide,
                      BinaryOp::maximum, BinaryOp::minimum, BinaryOp::average})
    for (Broadcast how : {Broadcast::full, Broadcast::column, Broadcast::row, Broadcast::scalar})
      for (bool constant : {false, true}) {
        SCOPED_TRACE(std::string(binary_op_name(op)) + " " + std::to_string(static_cast<int>(how)));
        BinaryShape s{rows, cols, Broadcast::full, how, 0.0f, 1.5f};
        const auto nb = static_cast<std::size_t>(broadcast_size(how, rows, cols));
        const auto a = random_values(n, seed += 10), b = random_values(nb, seed + 1);
        const auto dy = random_values(n, seed + 2);
        Memory c(*cpu_), g(*gpu_);
        const float *bc = constant ? nullptr : c.values(b), *bg = constant ? nullptr : g.values(b);
        const float *ac = c.values(a), *ag = g.values(a);
        float *yc = c.poisoned(n), *yg = g.poisoned(n);
        cpu_->binary_forward(op, s, ac, bc, yc);
        gpu_->binary_forward(op, s, ag, bg, yg);
        EXPECT_EQ(g.get(yg, n), c.get(yc, n));
        float *dac = c.poisoned(n), *dag = g.poisoned(n);
        float *dbc = constant ? nullptr : c.poisoned(nb),
              *dbg = constant ? nullptr : g.poisoned(nb);
        cpu_->binary_backward(op, s, ac, bc, c.values(dy), dac, dbc);
        gpu_->binary_backward(op, s, ag, bg, g.values(dy), dag, dbg);
        // the sums may contract a product into an FMA on one device and not the other
        expect_close(g.get(dag, n), c.get(dac, n), 1e-5, 1e-5, "da");
        if (!constant) expect_close(g.get(dbg, nb), c.get(dbc, nb), 1e-5, 1e-5, "db");
      }
  const auto x = random_values(n, seed + 3);
  Memory c(*cpu_), g(*gpu_);
  float *yc = c.poisoned(rows), *yg = g.poisoned(rows);
  cpu_->row_sum(c.values(x), yc, rows, cols, 1.0f / 13.0f);
  gpu_->row_sum(g.values(x), yg, rows, cols, 1.0f / 13.0f);
  expect_close(g.get(yg, rows), c.get(yc, rows), 1e-6, 1e-6, "row sums");
}

class CudaBatchNormTest : public CudaBackendTest {};

struct NormCase {
  int64_t m;
  BatchNormShape shape;
};
// After a Dense layer (spatial 1); a small image; more than 32 channels, not a multiple of 32;
// more rows than one block sums (512), and far more (the convnet's first layer at batch 128:
// 169 blocks of rows); scale or center off; a non-default epsilon.
std::vector<NormCase> norm_cases() {
  return {{7, {.spatial = 1, .channels = 13}},
          {5, {.spatial = 36, .channels = 4}},
          {3, {.spatial = 25, .channels = 70}},
          {2000, {.spatial = 1, .channels = 3}},
          {128, {.spatial = 676, .channels = 32}},
          {6, {.spatial = 9, .channels = 5, .scale = false}},
          {6, {.spatial = 9, .channels = 5, .center = false}},
          {4, {.spatial = 16, .channels = 6, .epsilon = 0.1f, .scale = false, .center = false}}};
}

std::string norm_name(const NormCase& c) {
  const BatchNormShape& s = c.shape;
  return "m=" + std::to_string(c.m) + " spatial " + std::to_string(s.spatial) + " channels " +
         std::to_string(s.channels) + " epsilon " + std::to_string(s.epsilon) +
         (s.scale ? " scale" : "") + (s.center ? " center" : "");
}

// The inputs of one case: x with a per-channel offset and spread (so that neither the mean nor the
// variance is near 0 or 1), gamma, beta, moving statistics (variance positive), dy.
struct NormInputs {
  std::vector<float> x, gamma, beta, mean, variance, dy;
};
NormInputs norm_inputs(const NormCase& c, uint32_t seed) {
  const auto ch = static_cast<std::size_t>(c.shape.channels);
  const auto n = static_cast<std::size_t>(c.m * c.shape.spatial) * ch;
  NormInputs in;
  in.x = random_values(n, seed);
  const auto offset = random_values(ch, seed + 1, -2.0f, 2.0f);
  const auto spread = random_values(ch, seed + 2, 0.5f, 3.0f);
  for (std::size_t i = 0; i < n; ++i) in.x[i] = in.x[i] * spread[i % ch] + offset[i % ch];
  in.gamma = random_values(ch, seed + 3, 0.5f, 1.5f);
  in.beta = random_values(ch, seed + 4);
  in.mean = random_values(ch, seed + 5);
  in.variance = random_values(ch, seed + 6, 0.5f, 2.0f);
  in.dy = random_values(n, seed + 7);
  return in;
}

TEST_F(CudaBatchNormTest, TrainingForwardMatchesCpuWithTheBatchStatistics) {
  uint32_t seed = 8000;
  for (const NormCase& nc : norm_cases()) {
    SCOPED_TRACE(norm_name(nc));
    const BatchNormShape& s = nc.shape;
    const NormInputs in = norm_inputs(nc, seed += 10);
    const auto n = in.x.size(), ch = in.gamma.size();
    Memory c(*cpu_), g(*gpu_);
    cpu_->batchnorm_prepare(s, nc.m);
    gpu_->batchnorm_prepare(s, nc.m);
    float *yc = c.poisoned(n), *mc = c.poisoned(ch), *vc = c.poisoned(ch);
    float *yg = g.poisoned(n), *mg = g.poisoned(ch), *vg = g.poisoned(ch);
    cpu_->batchnorm_forward_training(s, c.values(in.x), s.scale ? c.values(in.gamma) : nullptr,
                                     s.center ? c.values(in.beta) : nullptr, yc, mc, vc, nc.m);
    gpu_->batchnorm_forward_training(s, g.values(in.x), s.scale ? g.values(in.gamma) : nullptr,
                                     s.center ? g.values(in.beta) : nullptr, yg, mg, vg, nc.m);
    // oneDNN sums in float, our kernels add their partials in double: up to 86,528 rows apart.
    expect_close(g.get(mg, ch), c.get(mc, ch), 1e-5, 1e-5, "mean");
    expect_close(g.get(vg, ch), c.get(vc, ch), 1e-4, 1e-6, "variance");
    expect_close(g.get(yg, n), c.get(yc, n), 1e-4, 1e-4, "y");
  }
}

TEST_F(CudaBatchNormTest, InferenceForwardMatchesCpuWithTheGivenStatistics) {
  uint32_t seed = 8500;
  for (const NormCase& nc : norm_cases()) {
    SCOPED_TRACE(norm_name(nc));
    const BatchNormShape& s = nc.shape;
    const NormInputs in = norm_inputs(nc, seed += 10);
    const auto n = in.x.size();
    Memory c(*cpu_), g(*gpu_);
    cpu_->batchnorm_prepare(s, nc.m);
    gpu_->batchnorm_prepare(s, nc.m);
    float* yc = c.poisoned(n);
    float* yg = g.poisoned(n);
    cpu_->batchnorm_forward_inference(s, c.values(in.x), s.scale ? c.values(in.gamma) : nullptr,
                                      s.center ? c.values(in.beta) : nullptr, c.values(in.mean),
                                      c.values(in.variance), yc, nc.m);
    gpu_->batchnorm_forward_inference(s, g.values(in.x), s.scale ? g.values(in.gamma) : nullptr,
                                      s.center ? g.values(in.beta) : nullptr, g.values(in.mean),
                                      g.values(in.variance), yg, nc.m);
    expect_close(g.get(yg, n), c.get(yc, n), 1e-5, 1e-6, "y");
  }
}

TEST_F(CudaBatchNormTest, BackwardMatchesCpuForDxDgammaAndDbeta) {
  uint32_t seed = 9000;
  for (const NormCase& nc : norm_cases()) {
    SCOPED_TRACE(norm_name(nc));
    const BatchNormShape& s = nc.shape;
    const NormInputs in = norm_inputs(nc, seed += 10);
    const auto n = in.x.size(), ch = in.gamma.size();
    // The batch statistics as the CPU's training forward wrote them, on both devices.
    Memory c(*cpu_), g(*gpu_);
    cpu_->batchnorm_prepare(s, nc.m);
    gpu_->batchnorm_prepare(s, nc.m);
    float *y = c.poisoned(n), *mean = c.poisoned(ch), *variance = c.poisoned(ch);
    const float* x = c.values(in.x);
    cpu_->batchnorm_forward_training(s, x, c.values(in.gamma), c.values(in.beta), y, mean, variance,
                                     nc.m);
    const auto batch_mean = c.get(mean, ch), batch_variance = c.get(variance, ch);
    float *dxc = c.poisoned(n), *dgc = s.scale ? c.poisoned(ch) : nullptr,
          *dbc = s.center ? c.poisoned(ch) : nullptr;
    float *dxg = g.poisoned(n), *dgg = s.scale ? g.poisoned(ch) : nullptr,
          *dbg = s.center ? g.poisoned(ch) : nullptr;
    cpu_->batchnorm_backward(s, x, c.values(in.dy), s.scale ? c.values(in.gamma) : nullptr, mean,
                             variance, dxc, dgc, dbc, nc.m);
    gpu_->batchnorm_backward(s, g.values(in.x), g.values(in.dy),
                             s.scale ? g.values(in.gamma) : nullptr, g.values(batch_mean),
                             g.values(batch_variance), dxg, dgg, dbg, nc.m);
    EXPECT_LE(relative_error(g.get(dxg, n), c.get(dxc, n)), 1e-4) << "dx";
    if (s.scale) {
      EXPECT_LE(relative_error(g.get(dgg, ch), c.get(dgc, ch)), 1e-4) << "dgamma";
    }
    if (s.center) {
      EXPECT_LE(relative_error(g.get(dbg, ch), c.get(dbc, ch)), 1e-4) << "dbeta";
    }
  }
}

TEST_F(CudaBatchNormTest, MovingStatisticsUpdateIsTheCpusBitForBit) {
  const int64_t ch = 37;
  const auto mean = random_values(ch, 9501), variance = random_values(ch, 9502, 0.1f, 3.0f),
             moving_mean = random_values(ch, 9503),
             moving_variance = random_values(ch, 9504, 0.1f, 3.0f);
  const BatchNormShape s{.spatial = 4, .channels = ch};
  Memory c(*cpu_), g(*gpu_);
  float *mmc = c.values(moving_mean), *mvc = c.values(moving_variance);
  float *mmg = g.values(moving_mean), *mvg = g.values(moving_variance);
  for (double momentum : {0.99, 0.9}) {
    cpu_->batchnorm_update_moving(s, c.values(mean), c.values(variance), mmc, mvc, momentum);
    gpu_->batchnorm_update_moving(s, g.values(mean), g.values(variance), mmg, mvg, momentum);
  }
  EXPECT_EQ(g.get(mmg, ch), c.get(mmc, ch));
  EXPECT_EQ(g.get(mvg, ch), c.get(mvc, ch));
}

TEST_F(CudaBatchNormTest, StatisticsAndGradientsAreBitIdenticalRunToRun) {
  // The per-channel sums are split among many blocks here (676 x 128 rows): with no atomics their
  // order is fixed, so two runs give the same bits.
  const NormCase nc{128, {.spatial = 676, .channels = 32}};
  const BatchNormShape& s = nc.shape;
  const NormInputs in = norm_inputs(nc, 9600);
  const auto n = in.x.size(), ch = in.gamma.size();
  auto run = [&] {
    auto gpu = make_cuda_backend(0);
    Memory g(*gpu);
    gpu->batchnorm_prepare(s, nc.m);
    float *x = g.values(in.x), *gamma = g.values(in.gamma), *dy = g.values(in.dy);
    float *y = g.poisoned(n), *mean = g.poisoned(ch), *variance = g.poisoned(ch);
    float *dx = g.poisoned(n), *dgamma = g.poisoned(ch), *dbeta = g.poisoned(ch);
    gpu->batchnorm_forward_training(s, x, gamma, g.values(in.beta), y, mean, variance, nc.m);
    gpu->batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, nc.m);
    return std::vector<std::vector<float>>{g.get(y, n),  g.get(mean, ch),   g.get(variance, ch),
                                           g.get(dx, n), g.get(dgamma, ch), g.get(dbeta, ch)};
  };
  EXPECT_EQ(run(), run());
}

TEST_F(CudaBatchNormTest, InACapturedGraphItMatchesEagerCallsWithoutAPrepareOfItsOwn) {
  // The planning pass sizes the scratch of the sums (no batchnorm_prepare here); the captured
  // training forward, moving update and backward then match the same calls made eagerly.
  const NormCase nc{9, {.spatial = 100, .channels = 40}};
  const BatchNormShape& s = nc.shape;
  const NormInputs in = norm_inputs(nc, 9700);
  const auto n = in.x.size(), ch = in.gamma.size();
  struct Step {
    float *x, *gamma, *beta, *y, *mean, *variance, *moving_mean, *moving_variance, *dy, *dx,
        *dgamma, *dbeta;
  };
  auto make = [&](Memory& mem) {
    return Step{mem.values(in.x),    mem.values(in.gamma),    mem.values(in.beta),
                mem.poisoned(n),     mem.poisoned(ch),        mem.poisoned(ch),
                mem.values(in.mean), mem.values(in.variance), mem.values(in.dy),
                mem.poisoned(n),     mem.poisoned(ch),        mem.poisoned(ch)};
  };
  auto run = [&](Backend& be, const Step& t) {
    be.batchnorm_forward_training(s, t.x, t.gamma, t.beta, t.y, t.mean, t.variance, nc.m);
    be.batchnorm_update_moving(s, t.mean, t.variance, t.moving_mean, t.moving_variance, 0.99);
    be.batchnorm_backward(s, t.x, t.dy, t.gamma, t.mean, t.variance, t.dx, t.dgamma, t.dbeta, nc.m);
  };
  auto gpu2 = make_cuda_backend(0);
  Memory gm(*gpu_), em(*gpu2);
  const Step gs = make(gm), es = make(em);
  auto graph = gpu_->capture([&] { run(*gpu_, gs); }, true);
  auto eager = gpu2->capture([&] { run(*gpu2, es); }, false);
  graph->replay();
  eager->replay();
  for (auto [got, want, size, what] :
       {std::tuple{gs.y, es.y, n, "y"},
        std::tuple{gs.moving_mean, es.moving_mean, ch, "moving mean"},
        std::tuple{gs.moving_variance, es.moving_variance, ch, "moving variance"},
        std::tuple{gs.dx, es.dx, n, "dx"}, std::tuple{gs.dgamma, es.dgamma, ch, "dgamma"},
        std::tuple{gs.dbeta, es.dbeta, ch, "dbeta"}})
    EXPECT_EQ(gm.get(got, size), em.get(want, size)) << "graph vs eager " << what;
}

TEST_F(CudaBatchNormTest, ALargerBatchWhileCapturingIsAnError) {
  // The scratch is sized outside capture; a call that would need more inside it is refused.
  Memory g(*gpu_);
  const BatchNormShape s{.spatial = 1, .channels = 4};
  float* x = g.alloc<float>(4 * 5000);
  float* y = g.alloc<float>(4 * 5000);
  float* stats = g.alloc<float>(8);
  int calls = 0;
  EXPECT_THROW(gpu_->capture(
                   [&] {
                     const int64_t m = ++calls == 1 ? 10 : 5000;
                     gpu_->batchnorm_forward_training(s, x, nullptr, nullptr, y, stats, stats + 4,
                                                      m);
                   },
                   true),
               Error);
  gpu_->synchronize();
}

}  // namespace
}  // namespace crossover
