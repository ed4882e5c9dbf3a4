// Keras's legacy whole-model .h5 (model.save("m.h5"), see keras_h5.h) through libhdf5: read in
// the guard's child process as the .weights.h5 reader reads, written in memory as its writer does.
#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "formats/files.h"
#include "formats/keras_h5.h"
#include "formats/keras_h5_internal.h"

namespace crossover {

using namespace keras_h5_detail;

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
