#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace crossover::testing_util {

namespace {

// Every test process points CROSSOVER_PROFILE_DIR at a folder of its own (unless the caller chose
// one): what the commands it runs calibrate, and the thread counts they measure and keep, never
// reach the real HOME. Removed at exit.
std::string& own_profile_dir() {
  static std::string dir;
  return dir;
}
const bool kProfileDirSet = [] {
  if (std::getenv("CROSSOVER_PROFILE_DIR") != nullptr) return false;
  own_profile_dir() = (std::filesystem::temp_directory_path() /
                       ("crossover-test-profiles-" + std::to_string(::getpid())))
                          .string();
  ::setenv("CROSSOVER_PROFILE_DIR", own_profile_dir().c_str(), 1);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(own_profile_dir(), ec);
  });
  return true;
}();

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

std::string temp_folder(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p =
      fs::temp_directory_path() / ("crossover-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

const std::string& source_dir() {
  static const std::string dir = CROSSOVER_SOURCE_DIR;
  return dir;
}

const std::string& binary_path() {
  static const std::string path = CROSSOVER_BINARY;
  return path;
}

CommandResult run_crossover(const std::string& args, const std::string& launcher) {
  static int counter = 0;
  const std::string dir = temp_folder("cmd" + std::to_string(counter++));
  const std::string out = dir + "/out", err = dir + "/err";
  const std::string cmd = (launcher.empty() ? "" : launcher + " ") +
                          crossover::testing_util::binary_path() + " " + args + " >" + out + " 2>" +
                          err + " </dev/null";
  CommandResult r;
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove_all(dir);
  return r;
}

const SafetensorsFile& keras_fixture(const std::string& file_name) {
  static std::map<std::string, SafetensorsFile> files;
  auto it = files.find(file_name);
  if (it == files.end())
    it = files
             .emplace(file_name, read_safetensors(crossover::testing_util::source_dir() +
                                                  "/tests/data/keras/" + file_name))
             .first;
  return it->second;
}

const Tensor& keras_fixture_tensor(const std::string& file_name, const std::string& tensor_name) {
  const Tensor* t = keras_fixture(file_name).find(tensor_name);
  if (!t) throw Error("tests/data/keras/" + file_name, "no tensor " + tensor_name);
  return *t;
}

}  // namespace crossover::testing_util
