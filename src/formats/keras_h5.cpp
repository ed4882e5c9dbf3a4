// Keras 3's .weights.h5 files through libhdf5 (see keras_h5.h for the layout).
#include "formats/keras_h5.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "formats/files.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"

namespace crossover {
namespace {

constexpr std::size_t kMaxLinksPerGroup = 4096;  // a Sequential model has a few dozen layers
constexpr std::size_t kMaxNameBytes = 256;
constexpr int kMaxRank = 8;
// Every HDF5 file starts with this signature (at offset 0 when it has no user block, as h5py
// and Keras write it).
constexpr uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// libhdf5 (Debian's serial build) is not thread-safe: one call into it at a time.
std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

// The innermost description on libhdf5's error stack (the most specific), then the stack
// cleared. libhdf5's automatic printing of the stack to stderr is off (quiet_hdf5()).
std::string hdf5_message() {
  std::string deepest;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e && e->desc && *e->desc) *static_cast<std::string*>(data) = e->desc;
        return 0;
      },
      &deepest);
  H5Eclear2(H5E_DEFAULT);
  return deepest.empty() ? "libhdf5 failed" : "libhdf5: " + printable_name(deepest);
}

[[noreturn]] void fail_hdf5(const std::string& where, const std::string& what) {
  throw Error(where, what + " (" + hdf5_message() + ")");
}

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// An HDF5 identifier, closed with its own close function.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id& operator=(Id&&) = delete;
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// ---- reading ---------------------------------------------------------------------------------

struct Reader {
  std::string where;
  std::size_t file_bytes = 0;
  std::size_t bytes_read = 0;  // all datasets so far: never more than the file holds
};

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

// A Keras 2 (legacy, tf.keras's model.save_weights("x.h5")) file has its layers at the root,
// listed in the root attribute "layer_names".
bool looks_like_keras2(hid_t root) {
  const bool yes = H5Aexists(root, "layer_names") > 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

// ---- writing ---------------------------------------------------------------------------------

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

Id create_group(const std::string& where, hid_t parent, const std::string& name) {
  Id g(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) fail_hdf5(where, "cannot create group '" + printable_name(name) + "'");
  return g;
}

void write_dataset(const std::string& where, hid_t group, const std::string& name, const Tensor& t,
                   hid_t lcpl = H5P_DEFAULT) {
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

// Keras's naming.to_snake_case for the class names crossover has ("Dense" -> "dense",
// "MaxPooling2D" -> "max_pooling2d", "Conv2DTranspose" -> "conv2d_transpose"): a '_' before a
// capital after a lower-case letter, or before a capital that starts a word (one followed by a
// lower-case letter) anywhere but first.
std::string snake_case(std::string_view class_name) {
  const auto lower = [&](std::size_t i) {
    return i < class_name.size() && class_name[i] >= 'a' && class_name[i] <= 'z';
  };
  std::string out;
  for (std::size_t i = 0; i < class_name.size(); ++i) {
    const char c = class_name[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0 && (lower(i - 1) || lower(i + 1))) out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

// The model's layers as Keras 3 saves them (InputLayer excluded), each with its group's key and
// the crossover names of its variables in Keras's order.
struct LayerSlot {
  const Layer* layer;
  int number;        // 1-based, among model.layers as Keras counts them
  std::string key;   // "dense"; an inner layer's group below its layer's: "time_distributed/layer"
  std::string name;  // the layer whose variables they are (its vars' name)
  std::vector<std::string> variables;  // "dense/kernel", "dense/bias"
};

std::vector<LayerSlot> layer_slots(const Sequential& model) {
  std::vector<LayerSlot> slots;
  std::map<std::string, int> used;
  int number = 0;
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = model.layers()[i];
    // A shared layer's weights are its first call's.
    if (layer_kind(layer).is_model_input() || model.layer_shared_with()[i] >= 0) continue;
    const std::string base = snake_case(layer_type_name(layer.type));
    auto [it, fresh] = used.try_emplace(base, 0);
    const std::string key = fresh ? base : fmt::format("{}_{}", base, ++it->second);
    ++number;
    // Its own variables, then each inner layer's in a group of its own below it (Keras saves a
    // layer's trainable variables, then its non-trainable ones).
    for (KerasWeightGroup& g : keras_weight_groups(layer))
      slots.push_back({&layer, number, g.group.empty() ? key : key + "/" + g.group,
                       std::move(g.layer_name), std::move(g.names)});
  }
  return slots;
}

std::string keys_of(const KerasH5Weights& w) {
  std::string s;
  for (const KerasH5Layer& l : w.layers)
    s += (s.empty() ? "" : ", ") + l.key + fmt::format(" ({} variables)", l.vars.size());
  return s.empty() ? "none" : s;
}

}  // namespace

namespace {

// The HDF5 signature at the file's start (`what`: the files of this kind, for the message).
void check_signature(std::span<const uint8_t> file, const std::string& where, const char* what) {
  if (file.size() < 48 || std::memcmp(file.data(), kSignature, 8) != 0)
    throw Error(
        where, fmt::format("not an HDF5 file (no HDF5 signature at its start): {} are HDF5", what));
}

// The file's bytes opened by libhdf5 in memory (the core driver, no backing store): nothing on
// disk is read. The caller holds hdf5_mutex, or is the guard's child.
Id open_image(std::span<const uint8_t> file, const std::string& where, const char* what) {
  check_signature(file, where, what);
  if (file[8] > 3)
    throw Error(where, fmt::format("HDF5 superblock version {} is unknown (libhdf5 writes 0 to "
                                   "3): corrupt",
                                   file[8]));
  quiet_hdf5();
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<uint8_t*>(file.data()), file.size()) < 0)
    fail_hdf5(where, "cannot set up libhdf5 to read the file");
  Id f(H5Fopen("crossover-weights-in-memory.h5", H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!f.ok()) fail_hdf5(where, "libhdf5 cannot open it: not an HDF5 file, or a corrupt one");
  return f;
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

// ---- the guard: libhdf5 in a child process ----------------------------------------------------
//
// libhdf5 1.10 crashes (SIGSEGV) or loops on some corrupt files (tests/python/test_saving.py
// found both with a few hundred files of 8 random bytes changed). So the parse runs in a forked
// child, which sends the weights (or the Error's message) back through a pipe; a child killed by
// a signal, or still busy after the deadline, is an Error, never a crash or a hang here.

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_tensor(std::vector<uint8_t>& out, const Tensor& t) {
  put_u64(out, t.shape().size());
  for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  out.insert(out.end(), p, p + t.size() * 4);
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

// Reads what serialize wrote (from our own child; still checked, as the child's memory may have
// been corrupted before it died).
struct Cursor {
  std::span<const uint8_t> in;
  std::size_t at = 0;
  const std::string& where;
  void need(uint64_t n) const {
    if (n > in.size() - at) throw Error(where, "the libhdf5 reader's answer is cut short");
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    at += 8;
    return v;
  }
  std::string string() {
    const uint64_t n = u64();
    need(n);
    std::string s(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return s;
  }
  // A count of items that each take at least one byte of what is left.
  uint64_t count() {
    const uint64_t n = u64();
    need(n);
    return n;
  }
  Tensor tensor() {
    const uint64_t rank = u64();
    if (rank > kMaxRank) throw Error(where, "the libhdf5 reader's answer is corrupt");
    Shape shape;
    uint64_t count = 1;
    for (uint64_t k = 0; k < rank; ++k) {
      const uint64_t d = u64();
      if (__builtin_mul_overflow(count, d, &count) || count > in.size())
        throw Error(where, "the libhdf5 reader's answer is corrupt");
      shape.push_back(static_cast<int64_t>(d));
    }
    need(count * 4);
    Tensor t(shape);
    if (count > 0) std::memcpy(t.data(), in.data() + at, count * 4);
    at += count * 4;
    return t;
  }
};

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

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Runs `parse` (which serializes what it read of `file`) in a forked child and returns its
// answer, or throws the child's Error or one saying why no answer came (a crash, a loop).
std::vector<uint8_t> parse_guarded(std::span<const uint8_t> file, const std::string& where,
                                   const std::function<std::vector<uint8_t>()>& parse) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(where, std::string("cannot make a pipe: ") + std::strerror(errno));
  pid_t pid;
  {
    // No other thread is inside libhdf5 while the child's copy of it is made.
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    pid = ::fork();
  }
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(where, std::string("cannot start the reader process: ") + std::strerror(e));
  }
  if (pid == 0) {  // the child: parse, answer, exit without running the parent's exit handlers
    ::close(fds[0]);
    // If libhdf5 crashes, die quietly: no core file, and not the parent's handlers (Python's
    // faulthandler would print the parent's tracebacks from here).
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    std::vector<uint8_t> answer;
    try {
      answer = parse();
    } catch (const Error& e) {
      answer.assign({'E'});
      const std::string m = e.what();
      answer.insert(answer.end(), m.begin(), m.end());
    } catch (...) {
      answer.assign({'E'});
    }
    write_all(fds[1], answer);
    ::_exit(0);
  }
  ::close(fds[1]);
  // The answer is at most the file's values plus names: a bound the parent enforces too.
  const std::size_t limit = 2 * file.size() + (1u << 20);
  const int seconds = 10 + static_cast<int>(file.size() >> 26);  // + 1 s per 64 MiB
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<uint8_t> answer;
  std::string trouble;
  uint8_t buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      trouble = fmt::format(
          "libhdf5 was still reading it after {} s (it loops on some corrupt "
          "files): corrupt",
          seconds);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: done, or dead
    if (answer.size() + static_cast<std::size_t>(n) > limit) {
      trouble = "the libhdf5 reader's answer is larger than the file: corrupt";
      break;
    }
    answer.insert(answer.end(), buf, buf + n);
  }
  ::close(fds[0]);
  if (!trouble.empty()) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!trouble.empty()) throw Error(where, trouble);
  if (WIFSIGNALED(status))
    throw Error(where, fmt::format("libhdf5 crashed reading it (signal {}, {}): the file is "
                                   "corrupt",
                                   WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || answer.empty())
    throw Error(where, "the libhdf5 reader stopped without an answer: the file is corrupt");
  if (answer[0] == 'E') {
    std::string message(answer.begin() + 1, answer.end());
    const std::string prefix = where + ": ";
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    throw Error(where, message.empty() ? "unreadable" : message);
  }
  return answer;
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

// The bytes of the HDF5 file built in memory (a core driver without a backing store), flushed.
static std::vector<uint8_t> file_image(const std::string& where, hid_t f) {
  if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) fail_hdf5(where, "cannot flush the file");
  const ssize_t size = H5Fget_file_image(f, nullptr, 0);
  if (size <= 0) fail_hdf5(where, "cannot get the file's bytes");
  std::vector<uint8_t> bytes(static_cast<std::size_t>(size));
  if (H5Fget_file_image(f, bytes.data(), bytes.size()) != size)
    fail_hdf5(where, "cannot get the file's bytes");
  return bytes;
}

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

KerasH5Weights keras_weights_of(const Sequential& model) {
  const std::vector<NamedTensor> all = model.get_weights();
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const NamedTensor& t : all)
      if (t.name == name) return t.value;
    throw Error("save_weights", "the model has no weight " + name);
  };
  KerasH5Weights w;
  w.model_name = model.name();
  for (const LayerSlot& s : layer_slots(model)) {
    KerasH5Layer l{s.key, s.name, {}};
    for (const std::string& v : s.variables) l.vars.push_back(find(v));
    w.layers.push_back(std::move(l));
  }
  return w;
}

void load_keras_weights(Sequential& model, const KerasH5Weights& weights, const std::string& path) {
  const std::vector<NamedTensor> expected = weights_to_load(model, path);
  auto shape_in_model = [&](const std::string& name) {
    for (const NamedTensor& t : expected)
      if (t.name == name) return t.value.shape();
    return Shape{};
  };
  const std::vector<LayerSlot> slots = layer_slots(model);
  std::vector<NamedTensor> values;  // the weights under crossover's names, for the load's checks
  std::vector<std::string> model_keys;
  for (const LayerSlot& s : slots) {
    model_keys.push_back(s.key);
    const std::string who = fmt::format("layer {} '{}' ({}, group layers/{})", s.number,
                                        s.layer->name, layer_type_name(s.layer->type), s.key);
    auto it = std::find_if(weights.layers.begin(), weights.layers.end(),
                           [&](const KerasH5Layer& l) { return l.key == s.key; });
    if (it == weights.layers.end()) {
      if (s.variables.empty()) continue;  // Keras does not need a group for Flatten, Dropout...
      throw Error(path, who + " is not in the file (it holds " + keys_of(weights) +
                            "): it was saved from a different architecture");
    }
    if (it->vars.size() != s.variables.size())
      throw Error(path, fmt::format("{}: {} variables in the file but {} in the model: it was "
                                    "saved from a different architecture",
                                    who, it->vars.size(), s.variables.size()));
    for (std::size_t i = 0; i < s.variables.size(); ++i) {
      const Shape want = shape_in_model(s.variables[i]);
      const std::string role = s.variables[i].substr(s.variables[i].rfind('/') + 1);
      if (it->vars[i].shape() != want)
        throw Error(path, fmt::format("{}: variable {} ({}) has shape {} in the file but {} in "
                                      "the model: it was saved from a different architecture",
                                      who, i, role, shape_to_string(it->vars[i].shape()),
                                      shape_to_string(want)));
      values.push_back({s.variables[i], it->vars[i]});
    }
  }
  for (const KerasH5Layer& l : weights.layers)
    if (!l.vars.empty() && !has(model_keys, l.key))
      throw Error(path, fmt::format("the file holds {} variables for group layers/{}, which the "
                                    "model does not have (the file holds {}): it was saved from "
                                    "a model with more layers",
                                    l.vars.size(), l.key, keys_of(weights)));
  load_named_weights(model, values, path);
}

void save_keras_weights_h5(const Sequential& model, const std::string& path) {
  if (model.get_weights().empty())
    throw Error(
        path,
        "the model has no weights to save yet: compile it with a known input shape, or fit it");
  write_keras_weights_h5(path, keras_weights_of(model));
}

void load_keras_weights_h5(Sequential& model, const std::string& path) {
  load_keras_weights(model, read_keras_weights_h5(path), path);
}

// ---- the legacy whole-model .h5 (keras_h5.h) --------------------------------------------------

namespace {

constexpr const char* kLegacyWhat = "Keras's .h5 model files";
// A model's JSON, or a list attribute's text, is at most this (a model of thousands of layers).
constexpr std::size_t kMaxTextBytes = std::size_t{64} << 20;

// Attribute `name` of `obj` (at /path) as text: a scalar string gives one item, a 1-D array of
// strings one each; an array with no elements of any type (Keras's empty list: an empty float
// array) none. nullopt when the attribute does not exist.
std::optional<std::vector<std::string>> text_items(const Reader& r, hid_t obj,
                                                   const std::string& name,
                                                   const std::string& path) {
  const htri_t exists = H5Aexists(obj, name.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (exists <= 0) return std::nullopt;
  const std::string who = fmt::format("attribute {} of /{}", name, path);
  Id attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail_hdf5(r.where, "cannot open the " + who);
  Id type(H5Aget_type(attr.get()), H5Tclose);
  Id space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.ok() || !space.ok()) fail_hdf5(r.where, "cannot read the type of the " + who);
  const H5S_class_t kind = H5Sget_simple_extent_type(space.get());
  if (kind == H5S_SIMPLE && H5Sget_simple_extent_ndims(space.get()) != 1)
    throw Error(r.where, "the " + who + " is not a list: not a Keras .h5 model file");
  const hssize_t n = kind == H5S_SCALAR   ? 1
                     : kind == H5S_SIMPLE ? H5Sget_simple_extent_npoints(space.get())
                                          : 0;
  if (n < 0 || static_cast<uint64_t>(n) > r.file_bytes)
    throw Error(r.where, "the " + who + " claims more items than the file holds: corrupt");
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw Error(r.where, "the " + who + " is not text: not a Keras .h5 model file");
  const auto count = static_cast<std::size_t>(n);
  if (H5Tis_variable_str(type.get()) > 0) {
    Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    if (!mem.ok() || H5Tset_size(mem.get(), H5T_VARIABLE) < 0 ||
        H5Tset_cset(mem.get(), H5Tget_cset(type.get())) < 0)
      fail_hdf5(r.where, "cannot read the " + who);
    std::vector<char*> texts(count, nullptr);
    if (H5Aread(attr.get(), mem.get(), texts.data()) < 0)
      fail_hdf5(r.where, "cannot read the " + who);
    std::size_t total = 0;
    for (char* t : texts) {
      const std::size_t len = t ? strnlen(t, kMaxTextBytes + 1) : 0;
      total += len;
      if (total <= kMaxTextBytes) out.emplace_back(t ? t : "", len);
    }
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, texts.data());
    if (total > kMaxTextBytes)
      throw Error(r.where, fmt::format("the {} holds more than {} bytes of text: not a Keras "
                                       ".h5 model file",
                                       who, kMaxTextBytes));
  } else {
    const std::size_t size = H5Tget_size(type.get());
    if (size == 0 || size > kMaxTextBytes / count || size * count > r.file_bytes)
      throw Error(r.where, "the " + who + " claims more text than the file holds: corrupt");
    std::vector<char> text(size * count, '\0');
    Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    if (!mem.ok() || H5Tset_size(mem.get(), size) < 0 ||
        H5Tset_strpad(mem.get(), H5T_STR_NULLPAD) < 0 ||
        H5Aread(attr.get(), mem.get(), text.data()) < 0)
      fail_hdf5(r.where, "cannot read the " + who);
    for (std::size_t i = 0; i < count; ++i)
      out.emplace_back(text.data() + i * size, strnlen(text.data() + i * size, size));
  }
  H5Eclear2(H5E_DEFAULT);
  return out;
}

// A list attribute as Keras's load_attributes_from_hdf5_group reads it: `name`, or the chunks
// name0, name1, ... it splits a large one into; nullopt when neither is there.
std::optional<std::vector<std::string>> text_list(const Reader& r, hid_t obj,
                                                  const std::string& name,
                                                  const std::string& path) {
  if (auto whole = text_items(r, obj, name, path)) return whole;
  std::optional<std::vector<std::string>> out;
  for (std::size_t chunk = 0; chunk < kMaxLinksPerGroup; ++chunk) {
    auto part = text_items(r, obj, name + std::to_string(chunk), path);
    if (!part) break;
    if (!out) out.emplace();
    out->insert(out->end(), part->begin(), part->end());
  }
  return out;
}

// A scalar text attribute of the root ("" when absent).
std::string root_text(const Reader& r, hid_t root, const std::string& name) {
  const auto items = text_items(r, root, name, "");
  if (!items) return "";
  if (items->size() != 1)
    throw Error(r.where, "the root attribute " + name + " is not one string: not a Keras .h5 " +
                             "model file");
  return items->front();
}

// The dataset at `name` ("sequential/dense/kernel") inside `group` (at /path), each step a hard
// link to a group, the last to a dataset.
Tensor read_weight(Reader& r, hid_t group, const std::string& name, const std::string& path) {
  std::vector<std::string> steps;
  for (std::size_t at = 0;;) {
    const std::size_t slash = name.find('/', at);
    steps.push_back(name.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  const std::string who = "/" + path + "/" + printable_name(name);
  std::vector<Id> opened;
  opened.reserve(steps.size());
  hid_t at = group;
  std::string walked = path;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string& step = steps[i];
    if (step.empty() || step == "." || step.size() > kMaxNameBytes)
      throw Error(r.where, "weight name '" + printable_name(name) + "' in /" + path +
                               " is not a path of names: not a Keras .h5 model file");
    H5L_info_t info;
    const htri_t exists = H5Lexists(at, step.c_str(), H5P_DEFAULT);
    if (exists <= 0 || H5Lget_info(at, step.c_str(), &info, H5P_DEFAULT) < 0) {
      H5Eclear2(H5E_DEFAULT);
      throw Error(r.where, who + " is listed in weight_names but is not in the file: corrupt");
    }
    if (info.type != H5L_TYPE_HARD)
      throw Error(r.where, who +
                               " goes through a soft or external link: Keras model files hold "
                               "groups and datasets only");
    walked += "/" + step;
    if (i + 1 == steps.size()) return read_variable(r, at, step, walked);
    opened.push_back(open_group(r, at, step, walked));
    at = opened.back().get();
  }
  throw Error(r.where, who + ": an empty weight name");  // not reached: steps is never empty
}

LegacyH5Model parse_legacy_in_process(std::span<const uint8_t> file, const std::string& where) {
  Reader r{where, file.size(), 0};
  Id f = open_image(file, where, kLegacyWhat);
  Id root(H5Gopen2(f.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) fail_hdf5(where, "cannot open the root group");
  LegacyH5Model m;
  m.model_config = root_text(r, root.get(), "model_config");
  if (m.model_config.empty()) {
    const std::vector<std::string> top = link_names(r, root.get(), "");
    throw Error(where, has(top, "layers") || has(top, "vars") || looks_like_keras2(root.get())
                           ? "a weights file (no model_config attribute): load it with "
                             "model.load_weights into a model of its architecture"
                           : "no model_config attribute: not a Keras .h5 model file");
  }
  m.training_config = root_text(r, root.get(), "training_config");
  m.keras_version = root_text(r, root.get(), "keras_version");
  m.backend = root_text(r, root.get(), "backend");
  const std::vector<std::string> top = link_names(r, root.get(), "");
  if (!has(top, "model_weights"))
    throw Error(where, "no /model_weights group: not a Keras .h5 model file");
  Id weights = open_group(r, root.get(), "model_weights", "model_weights");
  const auto layer_names = text_list(r, weights.get(), "layer_names", "model_weights");
  if (!layer_names)
    throw Error(where, "/model_weights has no layer_names attribute: not a Keras .h5 model file");
  if (layer_names->size() > kMaxLinksPerGroup)
    throw Error(
        where, fmt::format("/model_weights lists more than {} layers: corrupt", kMaxLinksPerGroup));
  const std::vector<std::string> groups = link_names(r, weights.get(), "model_weights");
  for (const std::string& name : *layer_names) {
    const std::string path = "model_weights/" + name;
    if (!has(groups, name))
      throw Error(where, "layer '" + printable_name(name) + "' of layer_names has no group /" +
                             printable_name(path) + ": corrupt");
    Id layer = open_group(r, weights.get(), name, path);
    LegacyH5Layer l;
    l.name = name;
    l.weight_names =
        text_list(r, layer.get(), "weight_names", path).value_or(std::vector<std::string>{});
    if (l.weight_names.size() > kMaxLinksPerGroup)
      throw Error(where, "/" + path + " lists too many weights: corrupt");
    for (const std::string& w : l.weight_names)
      l.weights.push_back(read_weight(r, layer.get(), w, path));
    m.layers.push_back(std::move(l));
  }
  return m;
}

std::vector<uint8_t> serialize(const LegacyH5Model& m) {
  std::vector<uint8_t> out{'L'};
  for (const std::string* t : {&m.model_config, &m.training_config, &m.keras_version, &m.backend})
    put_string(out, *t);
  put_u64(out, m.layers.size());
  for (const LegacyH5Layer& l : m.layers) {
    put_string(out, l.name);
    put_u64(out, l.weight_names.size());
    for (std::size_t i = 0; i < l.weight_names.size(); ++i) {
      put_string(out, l.weight_names[i]);
      put_tensor(out, l.weights[i]);
    }
  }
  return out;
}

LegacyH5Model deserialize_legacy(std::span<const uint8_t> in, const std::string& where) {
  Cursor c{in, 1, where};
  LegacyH5Model m;
  for (std::string* t : {&m.model_config, &m.training_config, &m.keras_version, &m.backend})
    *t = c.string();
  const uint64_t layers = c.count();
  for (uint64_t i = 0; i < layers; ++i) {
    LegacyH5Layer l;
    l.name = c.string();
    const uint64_t weights = c.count();
    for (uint64_t w = 0; w < weights; ++w) {
      l.weight_names.push_back(c.string());
      l.weights.push_back(c.tensor());
    }
    m.layers.push_back(std::move(l));
  }
  return m;
}

// A text attribute as h5py writes a str: a scalar variable-length UTF-8 string.
void write_text(const std::string& where, hid_t obj, const std::string& name,
                const std::string& text) {
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail_hdf5(where, "cannot make a string attribute");
  Id attr(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
          H5Aclose);
  const char* p = text.c_str();
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), &p) < 0)
    fail_hdf5(where, "cannot write the attribute " + name);
}

// A list attribute as Keras writes one: a 1-D array of variable-length UTF-8 strings; an empty
// list as an empty float64 array (numpy's np.asarray([])).
void write_text_list(const std::string& where, hid_t obj, const std::string& name,
                     const std::vector<std::string>& items) {
  const hsize_t n = items.size();
  Id space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (!space.ok()) fail_hdf5(where, "cannot make the attribute " + name);
  if (items.empty()) {
    Id attr(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose);
    if (!attr.ok()) fail_hdf5(where, "cannot write the attribute " + name);
    return;
  }
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!type.ok() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    fail_hdf5(where, "cannot make a string attribute");
  std::vector<const char*> texts;
  for (const std::string& t : items) texts.push_back(t.c_str());
  Id attr(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
          H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), type.get(), texts.data()) < 0)
    fail_hdf5(where, "cannot write the attribute " + name);
}

// A layer name as a group of /model_weights, or a weight name as a path in it: names, no empty
// step or '.', nothing HDF5 would read as another path.
void check_h5_name(const std::string& where, const std::string& name, bool path) {
  bool ok = !name.empty() && name.size() <= kMaxNameBytes * 4;
  std::size_t start = 0;
  while (ok) {
    const std::size_t slash = name.find('/', start);
    const std::string step = name.substr(start, slash == std::string::npos ? slash : slash - start);
    ok = !step.empty() && step != "." && (path || slash == std::string::npos);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (!ok)
    throw Error(where, fmt::format("{} '{}' cannot name an HDF5 {}", path ? "weight" : "layer",
                                   printable_name(name), path ? "dataset" : "group"));
}

}  // namespace

LegacyH5Model parse_legacy_h5_model(std::span<const uint8_t> file, const std::string& where) {
  check_signature(file, where, kLegacyWhat);
  const std::vector<uint8_t> answer =
      parse_guarded(file, where, [&] { return serialize(parse_legacy_in_process(file, where)); });
  if (answer[0] != 'L') throw Error(where, "the libhdf5 reader's answer is corrupt");
  return deserialize_legacy(answer, where);
}

LegacyH5Model read_legacy_h5_model(const std::string& path) {
  return parse_legacy_h5_model(read_file_bytes(path), path);
}

std::vector<uint8_t> legacy_h5_model_bytes(const LegacyH5Model& model, const std::string& where) {
  if (model.model_config.empty()) throw Error(where, "the model's JSON (model_config) is empty");
  for (const LegacyH5Layer& l : model.layers) {
    check_h5_name(where, l.name, false);
    if (l.weight_names.size() != l.weights.size())
      throw Error(where,
                  fmt::format("layer '{}': {} weight names for {} weights", printable_name(l.name),
                              l.weight_names.size(), l.weights.size()));
    for (const std::string& w : l.weight_names) check_h5_name(where, w, true);
  }
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  quiet_hdf5();
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0)
    fail_hdf5(where, "cannot set up libhdf5 to write the file");
  Id f(H5Fcreate("crossover-model-in-memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!f.ok()) fail_hdf5(where, "cannot create the file in memory");
  // Weight names are paths: their groups are made on the way, as h5py does.
  Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.ok() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0)
    fail_hdf5(where, "cannot set up libhdf5 to write the file");
  {
    Id root(H5Gopen2(f.get(), "/", H5P_DEFAULT), H5Gclose);
    if (!root.ok()) fail_hdf5(where, "cannot open the root group");
    write_text(where, root.get(), "backend", model.backend);
    write_text(where, root.get(), "keras_version", model.keras_version);
    write_text(where, root.get(), "model_config", model.model_config);
    if (!model.training_config.empty())
      write_text(where, root.get(), "training_config", model.training_config);
    Id weights = create_group(where, root.get(), "model_weights");
    std::vector<std::string> names;
    for (const LegacyH5Layer& l : model.layers) names.push_back(l.name);
    write_text_list(where, weights.get(), "layer_names", names);
    write_text(where, weights.get(), "backend", model.backend);
    write_text(where, weights.get(), "keras_version", model.keras_version);
    // Keras makes the groups in name order ("to avoid prefix issues").
    std::vector<const LegacyH5Layer*> sorted;
    for (const LegacyH5Layer& l : model.layers) sorted.push_back(&l);
    std::sort(sorted.begin(), sorted.end(),
              [](const LegacyH5Layer* a, const LegacyH5Layer* b) { return a->name < b->name; });
    for (const LegacyH5Layer* l : sorted) {
      Id group = create_group(where, weights.get(), l->name);
      write_text_list(where, group.get(), "weight_names", l->weight_names);
      for (std::size_t i = 0; i < l->weights.size(); ++i)
        write_dataset(where, group.get(), l->weight_names[i], l->weights[i], lcpl.get());
    }
  }
  return file_image(where, f.get());
}

void write_legacy_h5_model(const std::string& path, const LegacyH5Model& model) {
  const std::vector<uint8_t> bytes = legacy_h5_model_bytes(model, path);
  write_file_atomic(path, {std::span<const uint8_t>(bytes)});
}

}  // namespace crossover
