// How crossover's OpenMP threads wait between parallel regions.
//
// libgomp's idle threads spin for a long while (GOMP_SPINCOUNT, 300,000 by default) before they
// sleep. On an idle machine that makes a fork-join cheap; but when another process wants one of
// the cores, the spinning thread takes it from the thread doing the work, and a 2-thread epoch
// ran 10-20x slower than a 1-thread one (measured: 8 ms/step instead of 0.4 ms). A short spin
// keeps most of the fork-join speed and none of that collapse. libgomp reads its environment
// when it is loaded, before main(), so the default is set from the executable's preinit array,
// which runs before any shared library's initialisers. A value the user set is kept.
#include <cstdlib>

namespace {

void set_openmp_wait_default(int, char**, char**) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    setenv("GOMP_SPINCOUNT", "2000", 0);
}

__attribute__((section(".preinit_array"),
               used)) void (*const preinit_openmp_wait)(int, char**,
                                                        char**) = &set_openmp_wait_default;

}  // namespace
