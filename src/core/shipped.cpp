#include "core/shipped.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

namespace crossover {

namespace {

// The folder of the executable or shared object this function was linked into. The loader names
// the main program by nothing (dladdr then gives argv[0], which may be a bare "crossover"), so
// there the kernel's /proc/self/exe says where it is.
std::filesystem::path this_binary_dir() {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&this_binary_dir), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr)
    return {};
  const bool main_program = map->l_name == nullptr || map->l_name[0] == '\0';
  std::error_code ec;
  const std::filesystem::path p =
      std::filesystem::canonical(main_program ? "/proc/self/exe" : map->l_name, ec);
  return ec ? std::filesystem::path() : p.parent_path();
}

}  // namespace

std::vector<std::string> shipped_places(const std::string& name) {
  std::vector<std::string> places;
#ifdef CROSSOVER_SOURCE_DIR
  places.push_back(std::string(CROSSOVER_SOURCE_DIR) + "/" + (name == "mnist-10k" ? "data/" : "") +
                   name);
#endif
  if (const std::filesystem::path dir = this_binary_dir(); !dir.empty()) {
    places.push_back((dir / "share" / name).string());
    places.push_back((dir.parent_path() / "share" / name).string());
    places.push_back((dir.parent_path() / "share" / "crossover" / name).string());
  }
#ifdef CROSSOVER_INSTALL_DATADIR
  places.push_back(std::string(CROSSOVER_INSTALL_DATADIR) + "/" + name);
#endif
  return places;
}

}  // namespace crossover
