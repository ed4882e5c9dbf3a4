// For fuzz targets whose API takes a path: each input is written to one per-process scratch
// file (in RAM where /dev/shm exists), removed when the fuzzer exits.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace crossover::fuzz {

class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    path_ = (dir / ("crossover-fuzz-" + std::to_string(::getpid()) + "-" + name)).string();
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with the input; returns its path.
  const std::string& write(const uint8_t* data, size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) std::abort();
    if (size != 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    if (std::fclose(f) != 0) std::abort();
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace crossover::fuzz
