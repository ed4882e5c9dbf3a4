// Finding a data set: --data auto, mnist-10k, or a path.
//
// "auto" prefers real MNIST wherever a user is likely to have it and falls back to
// Fashion-MNIST (same shapes, installable from Debian), and always says which one it took: a
// model trained on the fallback scores differently, and nobody should mistake one for the other.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/shipped.h"
#include "data/dataset.h"
#include "data/detail.h"

namespace crossover::data {
namespace {

namespace fs = std::filesystem;

std::string describe(const DataSplits& d) {
  std::string what = d.name == "mnist"           ? "real MNIST"
                     : d.name == "fashion-mnist" ? "Fashion-MNIST"
                     : d.name == "mnist-10k"     ? "MNIST-10k, real digits shipped with crossover"
                                                 : d.name;
  return what + " (" + std::to_string(d.train.count) + " train, " + std::to_string(d.test.count) +
         " test)";
}

// A folder is the four IDX files; anything else that is a file is taken for an .npz.
DataSplits load_path(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(path, "no such file or folder");
  if (fs::is_directory(status)) return read_idx_folder(path);
  if (fs::path(path).extension() == ".npz" || fs::is_regular_file(status)) return read_npz(path);
  throw Error(path, "is neither a regular file nor a folder");
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

// A place to look for data, named as the user knows it; path "" when it cannot exist.
struct Candidate {
  std::string label;
  std::string path;
};

// $CROSSOVER_DATA as a candidate (path "" when unset or empty).
Candidate crossover_data_candidate() {
  const char* env = std::getenv("CROSSOVER_DATA");
  if (env != nullptr && *env != '\0') return {std::string("$CROSSOVER_DATA=") + env, env};
  return {"$CROSSOVER_DATA", ""};
}

bool exists(const Candidate& c) {
  std::error_code ec;
  return !c.path.empty() && fs::exists(c.path, ec);
}

DataSplits load_auto(const std::function<void(const std::string&)>& say) {
  std::vector<Candidate> candidates{crossover_data_candidate()};
  const char* home = std::getenv("HOME");
  candidates.push_back(
      {"~/.keras/datasets/mnist.npz",
       home && *home ? (fs::path(home) / ".keras/datasets/mnist.npz").string() : std::string()});
  candidates.push_back({"./data/mnist/", "data/mnist"});
  const std::size_t fallback = candidates.size();
  candidates.push_back({"/usr/share/datasets/fashion-mnist", "/usr/share/datasets/fashion-mnist"});

  std::vector<std::string> looked;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!exists(c)) {
      looked.push_back(c.label);
      continue;
    }
    // A candidate that exists but does not read is an error, not a reason to move on: silently
    // training on another data set than the one the user put there would be worse.
    DataSplits d = load_path(c.path);
    std::string line = "data: " + describe(d) + " from " + c.path;
    if (i == 0) line += " ($CROSSOVER_DATA)";
    if (i == fallback) line += " (no real MNIST found: looked at " + join(looked) + ")";
    if (say) say(line);
    return d;
  }
  throw Error("--data auto",
              "no data set found: looked at " + join(looked) +
                  "; install Debian's dataset-fashion-mnist or pass --data PATH (or --data "
                  "mnist-10k for the 10,000 digits shipped with crossover)");
}

}  // namespace

std::optional<DataSplits> find_keras_dataset(const std::string& kind, const std::string& file,
                                             std::vector<std::string>& looked) {
  if (kind != "mnist" && kind != "fashion-mnist")
    throw Error("find_keras_dataset",
                "unknown kind '" + kind + "': expected mnist or fashion-mnist");
  const bool fashion = kind == "fashion-mnist";
  const char* keras_home = std::getenv("KERAS_HOME");
  const char* home = std::getenv("HOME");
  fs::path datasets;
  std::string datasets_label;
  if (keras_home != nullptr && *keras_home != '\0') {
    datasets = fs::path(keras_home) / "datasets";
    datasets_label = datasets.string();
  } else if (home != nullptr && *home != '\0') {
    datasets = fs::path(home) / ".keras" / "datasets";
    datasets_label = datasets.string();
  }
  std::vector<Candidate> candidates{crossover_data_candidate()};
  Candidate& env = candidates.front();
  bool env_skipped = false;
  if (exists(env) && (detail::dataset_name_for(env.path) == "fashion-mnist") != fashion) {
    looked.push_back(env.label + " (skipped: " +
                     (fashion ? "not Fashion-MNIST by its name" : "Fashion-MNIST by its name") +
                     ")");
    env.path.clear();
    env_skipped = true;
  }
  const std::string keras_file = fashion ? "fashion-mnist" : file;
  if (keras_file.empty()) throw Error("mnist.load_data", "path is empty");
  if (fs::path(keras_file).is_absolute())
    candidates.push_back({keras_file, keras_file});
  else if (!datasets.empty())
    candidates.push_back({(datasets / keras_file).string(), (datasets / keras_file).string()});
  else
    candidates.push_back({"~/.keras/datasets/" + keras_file + " ($HOME unset)", ""});
  if (fashion)
    candidates.push_back(
        {"/usr/share/datasets/fashion-mnist", "/usr/share/datasets/fashion-mnist"});
  else
    candidates.push_back({"./data/mnist/", "data/mnist"});
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (exists(candidates[i])) return load_path(candidates[i].path);
    if (!(i == 0 && env_skipped)) looked.push_back(candidates[i].label);
  }
  return std::nullopt;
}

std::string mnist10k_folder() {
  const std::vector<std::string> places = shipped_places("mnist-10k");
  for (const std::string& p : places) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) return p;
  }
  throw Error("mnist-10k",
              "the 10,000 shipped digits were not found: looked at " +
                  (places.empty() ? std::string("nowhere (no paths compiled in)") : join(places)));
}

DataSplits load_data(const std::string& spec, const std::function<void(const std::string&)>& say) {
  if (spec.empty()) throw Error("--data", "empty: give auto, mnist-10k, a folder or an .npz file");
  if (spec == "auto") return load_auto(say);
  DataSplits d = spec == "mnist-10k" ? read_mnist10k(mnist10k_folder()) : load_path(spec);
  if (say) say("data: " + describe(d) + " from " + d.path);
  return d;
}

}  // namespace crossover::data
