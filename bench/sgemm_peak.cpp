// The GEMM floor's denominator: oneDNN's sgemm rate at 4096^3 on T threads (best of 5 runs),
// printed as one JSON line. Usage: sgemm_peak [threads] [size]
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const long n = argc > 2 ? std::atol(argv[2]) : 4096;
  omp_set_num_threads(threads);
  std::vector<float> a(static_cast<std::size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 1e30;
  for (int run = 0; run < 6; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) !=
        dnnl_success)
      return 1;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (run > 0 && s < best) best = s;  // the first run warms up
  }
  std::printf("{\"threads\": %d, \"size\": %ld, \"seconds\": %.6f, \"flops_per_second\": %.6e}\n",
              threads, n, best, 2.0 * n * n * n / best);
  return 0;
}
