// Helpers shared by the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "formats/safetensors.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "perf/profile.h"

namespace crossover::testing_util {

// The source tree and the crossover binary under test (only test_util.cpp is compiled with their
// paths, so that the other test files compile the same in every checkout and ccache shares them).
const std::string& source_dir();
const std::string& binary_path();

// data/mnist-10k as float tensors, read once per test process.
struct Mnist10k {
  Tensor x_train, y_train, x_test, y_test;
  static const Mnist10k& get() {
    static const Mnist10k d = [] {
      data::DataSplits s = data::read_mnist10k(data::mnist10k_folder());
      return Mnist10k{data::to_float_images(s.train), data::to_float_labels(s.train),
                      data::to_float_images(s.test), data::to_float_labels(s.test)};
    }();
    return d;
  }
};

// The relative L2 difference of two tensors of one size: |a - b| / |b| (b all zeros: |a - b| /
// 1e-30), as the CPU/GPU parity tests compare weights.
inline double relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// `layers` with every layer's dtype policy `policy` (Keras's set_global_policy before making
// them): mixed_bfloat16 layers train in bf16 (Sequential::compile takes the precision from them).
inline std::vector<Layer> with_dtype_policy(std::vector<Layer> layers,
                                            DTypePolicy policy = DTypePolicy::mixed_bfloat16) {
  for (Layer& l : layers) l.dtype_policy = policy;
  return layers;
}

// Deterministic uniform values in [lo, hi).
inline Tensor random_tensor(Shape shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i)
    t[i] = lo + (hi - lo) * philox_uniform(seed, RngStream::init, 999, 0, static_cast<uint64_t>(i));
  return t;
}

// A CPU profile with made-up rates (a 64^3 GEMM entry, bandwidth and a call's floor) and nothing
// else: no convolution, pooling, batch-norm or allreduce entries, so that a cost test adds what it
// prices and knows every figure.
// The message of the crossover::Error that `f` throws ("" if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline perf::Profile made_up_cpu_profile() {
  perf::Profile p;
  p.name = "test cpu";
  p.memory_bytes_per_second = 1e10;
  p.memory_levels = {{"L2", 1 << 20, 4e10}, {"DRAM", 0, 1e10}};
  p.call_seconds = 1e-7;
  p.gemm.push_back({"", 64, 64, 64, 1e11});
  return p;
}

// A fixture of tests/data/keras (made by its make_*.py with Keras itself), read once per name.
const SafetensorsFile& keras_fixture(const std::string& file_name);
// One tensor of it; Error naming the file when it has none of that name.
const Tensor& keras_fixture_tensor(const std::string& file_name, const std::string& tensor_name);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the crossover binary with `args` (a shell-quoted string), capturing stdout and stderr;
// `launcher` (e.g. "mpirun -np 2"), when given, goes in front of the binary.
CommandResult run_crossover(const std::string& args, const std::string& launcher = "");

// Sets (or unsets, for nullptr) an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh empty folder under the test temp dir.
std::string temp_folder(const std::string& name);

}  // namespace crossover::testing_util
