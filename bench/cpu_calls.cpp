// The CPU backend's own calls at the seed models' shapes (batch 32), each timed alone: the
// elementwise calls of a step, the weight gradient followed by the optimizer's pass against the
// two fused in one call (Backend::dense_backward_weights_update), and oneDNN's sgemm on the weight
// gradient in one block of rows against smaller blocks. Best of many calls (the undisturbed
// time), so the figures hold up on a shared machine. docs/PERF.md quotes them. With bf16 (a CPU
// with AVX512_BF16 or AMX-BF16), the backend's bf16 products, the fused update writing the
// weights' bf16 copies as training does (each made first by a forward and an input gradient).
//
//   build/bench/cpu_calls [threads] [fp32|bf16]     (default 1 fp32)
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "nn/optimizers.h"

using namespace crossover;

namespace {

using Clock = std::chrono::steady_clock;

// The best time of `reps` calls of f, each after `before` (untimed).
double best_us(
    const std::function<void()>& f, const std::function<void()>& before = [] {}, int reps = 300) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    before();
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best * 1e6;
}

void elementwise(Backend& be) {
  const int64_t m = 32, n = 128, rows = 8000, cols = 784;
  std::vector<float> data(static_cast<std::size_t>(rows * cols), 0.5f);
  std::vector<float> x(static_cast<std::size_t>(m * cols)), h(static_cast<std::size_t>(m * n));
  std::vector<float> y(h.size()), dy(h.size(), 0.01f), dz(h.size());
  std::vector<float> logits(static_cast<std::size_t>(m * 10), 0.1f), labels(m, 3.0f);
  std::vector<float> dout(logits.size());
  std::vector<uint8_t> mask(h.size());
  std::vector<int32_t> order(static_cast<std::size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) order[static_cast<std::size_t>(i)] = int32_t(i * 7919 % rows);
  // ReLU outputs of both signs in no pattern a branch predictor learns.
  uint32_t s = 12345;
  for (float& v : h) {
    s = s * 1664525u + 1013904223u;
    v = (s >> 31) ? 0.3f : -0.2f;
  }
  StepCounters c;
  std::printf("gather batch x (32 x 784 of 8000 rows)   %8.2f us\n", best_us([&] {
                c.batch_index = (c.batch_index + 1) % (rows / m);
                be.gather_rows(data.data(), cols, order.data(), m, &c, m, x.data());
              }));
  std::printf("dropout forward (32 x 128)                %8.2f us\n", best_us([&] {
                be.dropout_forward(h.data(), y.data(), mask.data(), m, n, 0.2f, 1, 1, &c, 0);
              }));
  std::printf("dropout + relu backward (32 x 128)        %8.2f us\n", best_us([&] {
                be.relu_dropout_backward(y.data(), mask.data(), dy.data(), dz.data(), m, n, 0.2f);
              }));
  std::printf("loss forward+backward (32 x 10, softmax)  %8.2f us\n", best_us([&] {
                be.loss_forward_backward(LossKind::sparse_categorical_crossentropy,
                                         ActivationKind::softmax, logits.data(), labels.data(),
                                         nullptr, nullptr, dout.data(), m, 10, &c, m);
              }));
}

void fused_update(Backend& be, bool bf16) {
  struct Shape {
    int64_t m, k, n;
  };
  std::vector<float> flush(8 << 20, 1.0f);  // 32 MB: evicts the state between calls ("cold")
  auto evict = [&] {
    float a = 0;
    for (std::size_t i = 0; i < flush.size(); i += 16) a += flush[i];
    if (a < 0) std::printf("\n");
  };
  std::printf("\nweight gradient + Adam, separate (gradient, then optimizer_step) vs fused:\n");
  for (const Shape sh :
       {Shape{32, 784, 128}, Shape{32, 128, 10}, Shape{32, 784, 1000}, Shape{32, 1000, 1000}}) {
    const auto kn = static_cast<std::size_t>(sh.k * sh.n), n = static_cast<std::size_t>(sh.n);
    std::vector<float> x(static_cast<std::size_t>(sh.m * sh.k)), dy(sh.m * n, 0.01f);
    std::vector<float> g(kn), m1(kn), v(kn), b(n), gb(n), bm(n), bv(n);
    // The weights in the backend's memory, as a model's are: a bf16 backend forgets the copies of
    // weights that were where a new block is handed out.
    const std::unique_ptr<float, std::function<void(float*)>> weights(
        static_cast<float*>(be.allocate(kn * sizeof(float))), [&](float* p) { be.release(p); });
    std::span<float> w(weights.get(), kn);
    std::fill(w.begin(), w.end(), 0.1f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.01f;
    const std::vector<ParamSlot> slots{{w.data(), g.data(), m1.data(), v.data(), sh.k * sh.n, true},
                                       {b.data(), gb.data(), bm.data(), bv.data(), sh.n, false}};
    const OptimizerConfig adam = Adam();
    StepCounters c;
    if (bf16) {  // the copies the products read, as in training
      std::vector<float> y(sh.m * n), dx(x.size());
      be.dense_forward(x.data(), w.data(), b.data(), y.data(), sh.m, sh.k, sh.n,
                       ActivationKind::linear);
      be.dense_backward_input(dy.data(), w.data(), dx.data(), sh.m, sh.k, sh.n);
    }
    auto gradient = [&] {
      be.dense_backward_weights(x.data(), dy.data(), g.data(), gb.data(), sh.m, sh.k, sh.n);
    };
    auto separate = [&] {
      be.dense_backward_weights(x.data(), dy.data(), g.data(), gb.data(), sh.m, sh.k, sh.n);
      be.optimizer_step(adam, slots, &c);
    };
    auto fused = [&] {
      be.dense_backward_weights_update(x.data(), dy.data(), slots[0], &slots[1], sh.m, sh.k, sh.n,
                                       adam, &c);
      be.optimizer_step(adam, {}, &c);
    };
    for (bool cold : {false, true}) {
      const std::function<void()> before = cold ? std::function<void()>(evict) : [] {};
      const double gr = best_us(gradient, before, 60), a = best_us(separate, before, 60),
                   f = best_us(fused, before, 60);
      std::printf(
          "  %4ld x %-4ld %s: gradient %8.1f us, separate %8.1f us, fused %8.1f us (%.2fx)\n",
          long(sh.k), long(sh.n), cold ? "cold" : "warm", gr, a, f, a / f);
    }
  }
}

void row_blocks() {
  std::printf(
      "\noneDNN sgemm, weight gradient dw(k, n) = x^T dy (m = 32), in blocks of rows, "
      "one thread:\n");
  for (const int64_t n : {128, 1000})
    for (const int64_t k : {784, 1000}) {
      const int64_t m = 32;
      std::vector<float> x(static_cast<std::size_t>(m * k), 0.5f);
      std::vector<float> dy(static_cast<std::size_t>(m * n), 0.01f), dw(std::size_t(k * n));
      for (const int64_t rows : {k, int64_t{256}, int64_t{64}, int64_t{16}}) {
        const double us = best_us(
            [&] {
              for (int64_t r0 = 0; r0 < k; r0 += rows) {
                const int64_t r1 = std::min(k, r0 + rows);
                dnnl_sgemm('T', 'N', r1 - r0, n, m, 1.0f, x.data() + r0, k, dy.data(), n, 0.0f,
                           dw.data() + r0 * n, n);
              }
            },
            [] {}, 50);
        std::printf("  %4ld x %-4ld rows per block %4ld: %8.1f us  %5.1f GFLOP/s\n", long(k),
                    long(n), long(rows), us, 2.0 * double(m * n * k) / us / 1e3);
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  if (threads < 1) {
    std::fprintf(stderr, "cpu_calls: the thread count must be a positive integer\n");
    return 2;
  }
  const bool bf16 = argc > 2 && std::string(argv[2]) == "bf16";
  if (argc > 2 && !bf16 && std::string(argv[2]) != "fp32") {
    std::fprintf(stderr, "cpu_calls: the precision must be fp32 or bf16, not %s\n", argv[2]);
    return 2;
  }
  auto be = make_cpu_backend(threads, bf16 ? Precision::bf16 : Precision::fp32);
  std::printf("cpu_calls: %d thread%s, %s (best of many calls)\n", threads, threads > 1 ? "s" : "",
              bf16 ? "bf16" : "fp32");
  elementwise(*be);
  fused_update(*be, bf16);
  if (threads == 1) row_blocks();  // dnnl_sgemm threads itself; one thread is what each block gets
  return 0;
}
