// Reading Keras 3's .weights.h5 files through libhdf5 (see keras_h5.h for the layout), in the
// guard's child process (keras_h5_guard.cpp).
#include "formats/keras_h5.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "formats/files.h"
#include "formats/keras_h5_internal.h"

namespace crossover::keras_h5_detail {

// The names of a group's links, in name order, each checked to be a hard link (Keras refuses
// soft and external links: an external link would open another file).
std::vector<std::string> link_names(const Reader& r, hid_t group, const std::string& path) {
  struct Walk {
    std::vector<std::string> names;
    std::string bad;
    bool too_many = false;
  } walk;
  const herr_t status = H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
        auto* w = static_cast<Walk*>(data);
        if (w->names.size() >= kMaxLinksPerGroup) {
          w->too_many = true;
          return 1;
        }
        const std::size_t n = strnlen(name, kMaxNameBytes + 1);
        if (info->type != H5L_TYPE_HARD || n > kMaxNameBytes) {
          w->bad = std::string(name, n);
          return 1;
        }
        w->names.emplace_back(name, n);
        return 0;
      },
      &walk);
  if (walk.too_many)
    throw Error(r.where, fmt::format("group /{} holds more than {} entries: not a Keras weights "
                                     "file, or a corrupt one",
                                     path, kMaxLinksPerGroup));
  if (!walk.bad.empty())
    throw Error(r.where, "/" + path + "/" + printable_name(walk.bad) +
                             " is a soft or external link, or an overlong name: Keras weights "
                             "files hold groups and datasets only");
  if (status < 0) fail_hdf5(r.where, "cannot list group /" + path);
  return walk.names;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Opens the child `name` (a hard link, listed by link_names) as a group, or throws.
Id open_group(const Reader& r, hid_t parent, const std::string& name, const std::string& path) {
  Id obj(H5Oopen(parent, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.ok()) fail_hdf5(r.where, "cannot open /" + path);
  if (H5Iget_type(obj.get()) != H5I_GROUP)
    throw Error(r.where, "/" + path + " is not a group: not a Keras 3 .weights.h5 file");
  return obj;  // an object id of a group is a group id
}

// Reads dataset `name` of a vars group as float32, after checking everything libhdf5 reports
// about it against what a Keras variable is.
Tensor read_variable(Reader& r, hid_t vars, const std::string& name, const std::string& path) {
  const std::string who = "/" + path;
  Id obj(H5Oopen(vars, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.ok()) fail_hdf5(r.where, "cannot open " + who);
  if (H5Iget_type(obj.get()) != H5I_DATASET)
    throw Error(r.where, who + " is not a dataset: a Keras variable is one");
  Id ds(H5Dopen2(vars, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) fail_hdf5(r.where, "cannot open dataset " + who);

  Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok()) fail_hdf5(r.where, "cannot read the type of " + who);
  std::size_t element_bytes = 0;
  if (H5Tequal(type.get(), H5T_IEEE_F32LE) > 0 || H5Tequal(type.get(), H5T_IEEE_F32BE) > 0)
    element_bytes = 4;
  else if (H5Tequal(type.get(), H5T_IEEE_F64LE) > 0 || H5Tequal(type.get(), H5T_IEEE_F64BE) > 0)
    element_bytes = 8;
  H5Eclear2(H5E_DEFAULT);
  if (element_bytes == 0)
    throw Error(r.where, who + " is not a float32 or float64 dataset (HDF5 type class " +
                             std::to_string(static_cast<int>(H5Tget_class(type.get()))) + ", " +
                             std::to_string(H5Tget_size(type.get())) +
                             " bytes): crossover reads float weights only");

  Id space(H5Dget_space(ds.get()), H5Sclose);
  if (!space.ok()) fail_hdf5(r.where, "cannot read the shape of " + who);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  if (space_class != H5S_SIMPLE && space_class != H5S_SCALAR)
    throw Error(r.where, who + " has no shape (an empty HDF5 dataspace)");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > kMaxRank)
    throw Error(r.where, fmt::format("{} has {} dimensions (at most {})", who, rank, kMaxRank));
  hsize_t dims[kMaxRank] = {};
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims, nullptr) != rank)
    fail_hdf5(r.where, "cannot read the shape of " + who);
  Shape shape;
  uint64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dims[i]), &count) ||
        count > r.file_bytes)
      throw Error(r.where, fmt::format("{} claims more values than the file's {} bytes hold", who,
                                       r.file_bytes));
    shape.push_back(static_cast<int64_t>(dims[i]));
  }
  const uint64_t stored_bytes = count * element_bytes;

  // Only data inside this file, unfiltered: no external raw files, no virtual dataset mapping
  // other files, no compression (a small file must not unpack into a huge one).
  Id dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (!dcpl.ok()) fail_hdf5(r.where, "cannot read the storage of " + who);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT && layout != H5D_CHUNKED)
    throw Error(r.where, who +
                             " is a virtual dataset or has an unknown layout: crossover reads "
                             "data stored in the file itself");
  if (H5Pget_external_count(dcpl.get()) != 0)
    throw Error(r.where, who +
                             " keeps its data in external files: crossover reads data stored "
                             "in the file itself");
  if (H5Pget_nfilters(dcpl.get()) != 0)
    throw Error(r.where, who +
                             " is compressed or filtered: crossover reads unfiltered datasets "
                             "(as Keras writes them)");
  H5Eclear2(H5E_DEFAULT);
  if (H5Dget_storage_size(ds.get()) < stored_bytes)
    throw Error(r.where, fmt::format("{} of shape {} needs {} bytes but has {} stored: truncated "
                                     "or corrupt",
                                     who, shape_to_string(shape), stored_bytes,
                                     static_cast<uint64_t>(H5Dget_storage_size(ds.get()))));
  if (stored_bytes > r.file_bytes - std::min(r.file_bytes, r.bytes_read))
    throw Error(r.where, fmt::format("the datasets up to {} claim more data than the file's {} "
                                     "bytes hold: corrupt",
                                     who, r.file_bytes));
  r.bytes_read += stored_bytes;

  Tensor t(shape);
  if (count > 0 && H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()) < 0)
    fail_hdf5(r.where, "cannot read " + who);
  return t;
}

// A Keras 2 (legacy, tf.keras's model.save_weights("x.h5")) file has its layers at the root,
// listed in the root attribute "layer_names".
bool looks_like_keras2(hid_t root) {
  const bool yes = H5Aexists(root, "layer_names") > 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

}  // namespace crossover::keras_h5_detail

namespace crossover {

using namespace keras_h5_detail;

namespace {

// The "name" attribute of a group when it is a scalar string (Keras writes one on each vars
// group); "" otherwise: it only names things in messages.
std::string name_attribute(hid_t group) {
  std::string out;
  const bool exists = H5Aexists(group, "name") > 0;
  H5Eclear2(H5E_DEFAULT);
  if (!exists) return out;
  Id attr(H5Aopen(group, "name", H5P_DEFAULT), H5Aclose);
  Id type(attr.ok() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  Id space(attr.ok() ? H5Aget_space(attr.get()) : -1, H5Sclose);
  if (!type.ok() || !space.ok() || H5Tget_class(type.get()) != H5T_STRING ||
      H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) {
    H5Eclear2(H5E_DEFAULT);
    return out;
  }
  if (H5Tis_variable_str(type.get()) > 0) {
    Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) >= 0 && text) {
      out.assign(text, strnlen(text, kMaxNameBytes));
      H5free_memory(text);
    }
  } else {
    const std::size_t size = H5Tget_size(type.get());
    if (size > 0 && size <= kMaxNameBytes) {
      std::vector<char> text(size + 1, '\0');
      Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(mem.get(), size);
      if (H5Aread(attr.get(), mem.get(), text.data()) >= 0)
        out.assign(text.data(), strnlen(text.data(), size));
    }
  }
  H5Eclear2(H5E_DEFAULT);
  return printable_name(out);
}

// "0", "1", ... -> the index; anything else -> nullopt.
std::optional<std::size_t> variable_index(const std::string& name) {
  if (name.empty() || name.size() > 6 || (name.size() > 1 && name[0] == '0')) return std::nullopt;
  std::size_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  return v;
}

// /<path>/vars as a layer's variables (none when there is no vars group, as Keras reads it).
KerasH5Layer read_layer(Reader& r, hid_t layer, const std::string& key, const std::string& path) {
  KerasH5Layer out;
  out.key = key;
  const std::vector<std::string> children = link_names(r, layer, path);
  if (!has(children, "vars")) return out;
  const std::string vars_path = path + "/vars";
  Id vars = open_group(r, layer, "vars", vars_path);
  out.name = name_attribute(vars.get());
  const std::vector<std::string> names = link_names(r, vars.get(), vars_path);
  std::vector<std::string> ordered(names.size());
  for (const std::string& n : names) {
    const std::optional<std::size_t> i = variable_index(n);
    if (!i || *i >= names.size() || !ordered[*i].empty())
      throw Error(r.where, "/" + vars_path + " holds '" + printable_name(n) +
                               "': Keras names a layer's variables 0, 1, 2, ... without gaps");
    ordered[*i] = n;
  }
  for (const std::string& n : ordered)
    out.vars.push_back(read_variable(r, vars.get(), n, vars_path + "/" + n));
  return out;
}

// A layer's group: its own variables, then each group below it other than vars (an inner
// layer's: time_distributed/layer), as entries of their own keyed by their path below /layers.
// At most kMaxInnerDepth levels and kMaxLinksPerGroup entries in all.
constexpr int kMaxInnerDepth = 6;
void read_layer_groups(Reader& r, hid_t layer, const std::string& key, const std::string& path,
                       int depth, KerasH5Weights& out) {
  if (out.layers.size() >= kMaxLinksPerGroup)
    throw Error(r.where, fmt::format("more than {} layer groups under /layers: not a model's "
                                     "weights file",
                                     kMaxLinksPerGroup));
  out.layers.push_back(read_layer(r, layer, key, path));
  for (const std::string& child : link_names(r, layer, path)) {
    if (child == "vars") continue;
    const std::string child_path = path + "/" + child;
    if (depth + 1 > kMaxInnerDepth)
      throw Error(r.where, fmt::format("/{} is nested more than {} groups below its layer: not a "
                                       "Keras 3 .weights.h5 file",
                                       child_path, kMaxInnerDepth));
    Id inner = open_group(r, layer, child, child_path);
    read_layer_groups(r, inner.get(), key + "/" + child, child_path, depth + 1, out);
  }
}

// The parse itself, in this process (the caller holds hdf5_mutex, or is the guard's child).
KerasH5Weights parse_in_process(std::span<const uint8_t> file, const std::string& where) {
  Reader r{where, file.size(), 0};
  Id f = open_image(file, where, "Keras 3's .weights.h5 files");
  Id root(H5Gopen2(f.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) fail_hdf5(where, "cannot open the root group");

  const std::vector<std::string> top = link_names(r, root.get(), "");
  KerasH5Weights out;
  if (has(top, "vars")) {
    Id vars = open_group(r, root.get(), "vars", "vars");
    out.model_name = name_attribute(vars.get());
  }
  std::string layers_key = "layers";
  if (!has(top, layers_key)) layers_key = "_layer_checkpoint_dependencies";  // Keras 2.13
  if (!has(top, layers_key)) {
    if (looks_like_keras2(root.get()))
      throw Error(where,
                  "a legacy Keras 2 weights file (its root lists layer_names), not Keras "
                  "3's .weights.h5: load it with tf.keras 2 and save_weights again with "
                  "Keras 3, or use .safetensors");
    throw Error(where, "no /layers group: not a Keras 3 .weights.h5 file");
  }
  Id layers = open_group(r, root.get(), layers_key, layers_key);
  for (const std::string& key : link_names(r, layers.get(), layers_key)) {
    const std::string path = layers_key + "/" + key;
    Id layer = open_group(r, layers.get(), key, path);
    read_layer_groups(r, layer.get(), key, path, 0, out);
  }
  return out;
}

std::vector<uint8_t> serialize(const KerasH5Weights& w) {
  std::vector<uint8_t> out{'W'};
  put_string(out, w.model_name);
  put_u64(out, w.layers.size());
  for (const KerasH5Layer& l : w.layers) {
    put_string(out, l.key);
    put_string(out, l.name);
    put_u64(out, l.vars.size());
    for (const Tensor& t : l.vars) put_tensor(out, t);
  }
  return out;
}

KerasH5Weights deserialize(std::span<const uint8_t> in, const std::string& where) {
  Cursor c{in, 1, where};
  KerasH5Weights w;
  w.model_name = c.string();
  const uint64_t layers = c.count();
  for (uint64_t i = 0; i < layers; ++i) {
    KerasH5Layer l;
    l.key = c.string();
    l.name = c.string();
    const uint64_t vars = c.count();
    for (uint64_t v = 0; v < vars; ++v) l.vars.push_back(c.tensor());
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace

KerasH5Weights parse_keras_weights_h5(std::span<const uint8_t> file, const std::string& where) {
  check_signature(file, where, "Keras 3's .weights.h5 files");
  const std::vector<uint8_t> answer =
      parse_guarded(file, where, [&] { return serialize(parse_in_process(file, where)); });
  if (answer[0] != 'W') throw Error(where, "the libhdf5 reader's answer is corrupt");
  return deserialize(answer, where);
}

KerasH5Weights read_keras_weights_h5(const std::string& path) {
  return parse_keras_weights_h5(read_file_bytes(path), path);
}

}  // namespace crossover
