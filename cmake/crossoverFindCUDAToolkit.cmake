# find_package(CUDAToolkit), for crossover's own build and for its installed package.
#
# CMake 3.25's FindCUDAToolkit (Debian 12 ships 3.25.1) marks CUDA::nvToolsExt deprecated without
# checking that the target exists, and CUDA 12.9 and later ship no libnvToolsExt: configuring then
# fails ("set_property could not find TARGET CUDA::nvToolsExt") in any project that requires
# CMake 3.25. That step runs only when CMAKE_MINIMUM_REQUIRED_VERSION is 3.25 or more, so the call
# sees 3.24 (nothing else in the module reads it). A macro, so the results land in the caller.
macro(crossover_find_cuda_toolkit)
  set(_crossover_min_version "${CMAKE_MINIMUM_REQUIRED_VERSION}")
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  endif()
  find_package(CUDAToolkit ${ARGN})
  set(CMAKE_MINIMUM_REQUIRED_VERSION "${_crossover_min_version}")
  unset(_crossover_min_version)
endmacro()
