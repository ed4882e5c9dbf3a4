// Writing Keras 3's .weights.h5 files through libhdf5: the file built in memory, then its bytes
// written atomically.
#include <hdf5.h>

#include <mutex>

#include "core/error.h"
#include "formats/files.h"
#include "formats/keras_h5.h"
#include "formats/keras_h5_internal.h"

namespace crossover::keras_h5_detail {

Id create_group(const std::string& where, hid_t parent, const std::string& name) {
  Id g(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) fail_hdf5(where, "cannot create group '" + printable_name(name) + "'");
  return g;
}

void write_dataset(const std::string& where, hid_t group, const std::string& name, const Tensor& t,
                   hid_t lcpl) {
  std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
  Id space(dims.empty() ? H5Screate(H5S_SCALAR)
                        : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
           H5Sclose);
  if (!space.ok()) fail_hdf5(where, "cannot make the shape " + shape_to_string(t.shape()));
  Id ds(
      H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), lcpl, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!ds.ok()) fail_hdf5(where, "cannot create dataset " + name);
  if (t.size() > 0 &&
      H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) < 0)
    fail_hdf5(where, "cannot write dataset " + name);
}

// The bytes of the HDF5 file built in memory (a core driver without a backing store), flushed.
std::vector<uint8_t> file_image(const std::string& where, hid_t f) {
  if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) fail_hdf5(where, "cannot flush the file");
  const ssize_t size = H5Fget_file_image(f, nullptr, 0);
  if (size <= 0) fail_hdf5(where, "cannot get the file's bytes");
  std::vector<uint8_t> bytes(static_cast<std::size_t>(size));
  if (H5Fget_file_image(f, bytes.data(), bytes.size()) != size)
    fail_hdf5(where, "cannot get the file's bytes");
  return bytes;
}

}  // namespace crossover::keras_h5_detail

namespace crossover {

using namespace keras_h5_detail;

namespace {

void write_name_attribute(const std::string& where, hid_t group, const std::string& name) {
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail_hdf5(where, "cannot make a string attribute");
  Id attr(H5Acreate2(group, "name", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* text = name.c_str();
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), &text) < 0)
    fail_hdf5(where, "cannot write the attribute 'name' = '" + printable_name(name) + "'");
}

}  // namespace

std::vector<uint8_t> keras_weights_h5_bytes(const KerasH5Weights& weights,
                                            const std::string& where) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  quiet_hdf5();
  // Built in memory (the core driver, no backing store), then written atomically by the caller.
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0)
    fail_hdf5(where, "cannot set up libhdf5 to write the file");
  Id f(H5Fcreate("crossover-weights-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
       H5Fclose);
  if (!f.ok()) fail_hdf5(where, "cannot create the file in memory");
  {
    Id layers = create_group(where, f.get(), "layers");
    for (const KerasH5Layer& l : weights.layers) {
      Id layer = create_group(where, layers.get(), l.key);
      Id vars = create_group(where, layer.get(), "vars");
      write_name_attribute(where, vars.get(), l.name);
      for (std::size_t i = 0; i < l.vars.size(); ++i)
        write_dataset(where, vars.get(), std::to_string(i), l.vars[i]);
    }
    Id vars = create_group(where, f.get(), "vars");
    write_name_attribute(where, vars.get(), weights.model_name);
  }
  return file_image(where, f.get());
}

void write_keras_weights_h5(const std::string& path, const KerasH5Weights& weights) {
  const std::vector<uint8_t> bytes = keras_weights_h5_bytes(weights, path);
  write_file_atomic(path, {std::span<const uint8_t>(bytes)});
}

}  // namespace crossover
