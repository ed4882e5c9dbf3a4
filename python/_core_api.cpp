// crossover._core, continued: what crossover.keras.datasets, crossover.device and
// crossover.config need from the library (data discovery and readers, the CUDA devices).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda_info.h"
#include "crossover.h"

namespace nb = nanobind;
using namespace crossover;

namespace {

using ByteArray = nb::ndarray<nb::numpy, uint8_t>;

// A numpy uint8 array that takes over `bytes` (no copy), of shape `shape`.
ByteArray to_numpy(std::vector<uint8_t>&& bytes, const std::vector<std::size_t>& shape) {
  auto* owned = new std::vector<uint8_t>(std::move(bytes));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return ByteArray(owned->data(), shape.size(), shape.data(), owner);
}

// (x, y) of one split as Keras returns them: uint8 (N, H, W) and uint8 (N,).
nb::tuple split_to_python(data::ImageSet& set) {
  std::vector<std::size_t> x_shape{static_cast<std::size_t>(set.count)};
  for (int64_t d : set.item_shape) x_shape.push_back(static_cast<std::size_t>(d));
  const std::vector<std::size_t> y_shape{static_cast<std::size_t>(set.count)};
  return nb::make_tuple(to_numpy(std::move(set.pixels), x_shape),
                        to_numpy(std::move(set.labels), y_shape));
}

}  // namespace

void bind_api(nb::module_& m);  // called by _core.cpp's NB_MODULE

void bind_api(nb::module_& m) {
  m.def(
      "find_keras_dataset",
      [](const std::string& kind, const std::string& file) -> nb::object {
        std::vector<std::string> looked;
        std::optional<data::DataSplits> d;
        {
          nb::gil_scoped_release release;
          d = data::find_keras_dataset(kind, file, looked);
        }
        if (!d) return nb::make_tuple(nb::none(), nb::cast(looked));
        nb::dict found;
        found["train"] = split_to_python(d->train);
        found["test"] = split_to_python(d->test);
        found["name"] = d->name;
        found["path"] = d->path;
        return nb::make_tuple(found, nb::cast(looked));
      },
      nb::arg("kind"), nb::arg("file"),
      "(splits or None, places looked at): data::find_keras_dataset");

  m.def("cuda_built", &cuda_built,
        "Whether this build has the CUDA backend (compiled with nvcc), whatever the machine has");
  m.def(
      "cuda_devices",
      [] {
        std::vector<std::string> names;
        for (const CudaDeviceInfo& d : cuda_devices()) names.push_back(d.name);
        return names;
      },
      "The names of the CUDA devices, by ordinal (empty without CUDA)");
  m.def(
      "cuda_unavailable_reason",
      [](int ordinal) -> std::string {
        try {
          make_cuda_backend(ordinal, Precision::fp32);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      nb::arg("ordinal"), "The library's reason why cuda:N cannot train, or '' when it can");
}
