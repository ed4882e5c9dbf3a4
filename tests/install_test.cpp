// SLOW (about half a minute): installs this build with `cmake --install` into a temporary prefix,
// then configures, builds and runs tests/consumer/, a separate CMake project that does
// find_package(crossover) and links crossover::crossover, and trains a Dense model for one
// epoch. Skipped (with a message) when cmake is not on PATH, when the build folder cannot be
// found, or when CROSSOVER_SKIP_INSTALL_TEST is set.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tail(const std::string& s, std::size_t n = 4000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// Single-quoted for the shell.
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

struct CommandRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

CommandRun run(const std::string& command, const fs::path& log) {
  const std::string full = command + " >" + q(log.string()) + " 2>&1 </dev/null";
  const int status = std::system(full.c_str());
  CommandRun r;
  r.code = status == -1 ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  r.output = slurp(log);
  return r;
}

// KEY:TYPE=VALUE lines of a CMakeCache.txt.
std::map<std::string, std::string> read_cache(const fs::path& cache) {
  std::map<std::string, std::string> out;
  std::ifstream f(cache);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '/') continue;
    const auto colon = line.find(':'), eq = line.find('=');
    if (colon == std::string::npos || eq == std::string::npos || colon > eq) continue;
    out[line.substr(0, colon)] = line.substr(eq + 1);
  }
  return out;
}

fs::path find_file(const fs::path& root, const std::string& name) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename() == name) return it->path();
  return {};
}

TEST(Install, SlowConsumerProjectBuildsAndTrainsAgainstTheInstalledPackage) {
  if (std::getenv("CROSSOVER_SKIP_INSTALL_TEST"))
    GTEST_SKIP() << "CROSSOVER_SKIP_INSTALL_TEST is set";
  if (std::system("command -v cmake >/dev/null 2>&1") != 0)
    GTEST_SKIP()
        << "cmake is not on PATH: cannot test `cmake --install` and find_package(crossover)";
  // The crossover binary sits at the top of the build folder.
  const fs::path build = fs::path(crossover::testing_util::binary_path()).parent_path();
  if (!fs::exists(build / "CMakeCache.txt") || !fs::exists(build / "cmake_install.cmake"))
    GTEST_SKIP() << "no CMake build folder at " << build;
  const auto cache = read_cache(build / "CMakeCache.txt");
  const fs::path source = crossover::testing_util::source_dir();

  std::string tmpl = (fs::temp_directory_path() / "crossover-install-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path work = tmpl;
  const fs::path prefix = work / "prefix";
  bool keep = true;  // left behind for diagnosis unless everything passes
  struct Cleanup {
    const fs::path& dir;
    const bool& keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{work, keep};

  // 1. Install.
  CommandRun inst = run("cmake --install " + q(build.string()) + " --prefix " + q(prefix.string()),
                        work / "install.log");
  ASSERT_EQ(inst.code, 0) << "cmake --install failed:\n" << tail(inst.output);
  const fs::path lib = find_file(prefix, "libcrossover.a");
  ASSERT_FALSE(lib.empty()) << "no libcrossover.a under " << prefix;
  const fs::path config_dir = lib.parent_path() / "cmake" / "crossover";
  for (const char* f :
       {"crossoverConfig.cmake", "crossoverConfigVersion.cmake", "crossoverTargets.cmake"})
    EXPECT_TRUE(fs::exists(config_dir / f)) << (config_dir / f);
  const fs::path include = prefix / "include" / "crossover";
  for (const char* h :
       {"crossover.h", "core/tensor.h", "core/error.h", "nn/sequential.h", "nn/layers.h",
        "formats/weights_io.h", "formats/model_config.h", "formats/checkpoint.h", "data/dataset.h",
        "data/png.h", "backends/backend.h"})
    EXPECT_TRUE(fs::exists(include / h)) << (include / h);
  EXPECT_FALSE(fs::exists(include / "cli")) << "the command's own headers are not public";
  EXPECT_TRUE(fs::exists(prefix / "share" / "crossover" / "mnist-10k"));
  EXPECT_TRUE(fs::exists(prefix / "bin" / "crossover"));

  // 2. Configure the consumer against the installed package only, with this build's compiler
  // and flags (a sanitized or instrumented library needs the same at link time).
  std::string configure = "cmake -S " + q((source / "tests" / "consumer").string()) + " -B " +
                          q((work / "consumer-build").string()) +
                          " -DCMAKE_PREFIX_PATH=" + q(prefix.string()) +
                          " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF";
  for (const char* key : {"CMAKE_CXX_COMPILER", "CMAKE_BUILD_TYPE", "CMAKE_CXX_FLAGS",
                          "CMAKE_GENERATOR", "CMAKE_MAKE_PROGRAM", "CMAKE_CUDA_COMPILER"}) {
    auto it = cache.find(key);
    if (it == cache.end() || it->second.empty()) continue;
    if (std::string(key) == "CMAKE_GENERATOR")
      configure += " -G " + q(it->second);
    else
      configure += " -D" + std::string(key) + "=" + q(it->second);
  }
  CommandRun conf = run(configure, work / "configure.log");
  ASSERT_EQ(conf.code, 0) << "configuring tests/consumer failed:\n" << tail(conf.output);
  EXPECT_NE(conf.output.find("crossover 0.1.0 from " + config_dir.string()), std::string::npos)
      << "find_package(crossover) must find the installed package:\n"
      << tail(conf.output);

  // 3. Build it.
  CommandRun bld =
      run("cmake --build " + q((work / "consumer-build").string()) + " -j 2", work / "build.log");
  ASSERT_EQ(bld.code, 0) << "building tests/consumer failed:\n" << tail(bld.output);

  // 4. Run it: one epoch of training, the loss printed.
  const fs::path exe = find_file(work / "consumer-build", "consumer");
  ASSERT_FALSE(exe.empty());
  CommandRun go = run(q(exe.string()), work / "run.log");
  ASSERT_EQ(go.code, 0) << tail(go.output);
  EXPECT_NE(go.output.find("consumer: 804 parameters, 1 epoch, loss "), std::string::npos)
      << go.output;
  keep = ::testing::Test::HasFailure();
  if (keep) std::fprintf(stderr, "install test files kept in %s\n", work.c_str());
}

}  // namespace
