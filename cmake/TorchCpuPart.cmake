# The CPU part of a CUDA build of PyTorch, for a machine whose CUDA toolkit
# cannot serve that torch's own CMake package: none at all (PyTorch from pip
# on a laptop or a GPU workstation without nvcc, the common case), or one of
# another major version than the torch's (torch 2.1's package then fails on
# CUDA 13, which has no nvToolsExt). TorchConfig.cmake stops with "uses CUDA
# but I cannot find the CUDA libraries" in the first case, so qkv takes the
# package's targets itself, without their CUDA half: the same headers, compile
# definitions and libraries as torch_cpu, and no qkv CUDA kernels. A GPU still
# runs, through LibTorch's own kernels, once Python's torch has loaded its
# CUDA part (docs/gpu.md).
#
# qkv_torch_cpu_part(PREFIX VERSION CXX11_ABI): PREFIX is torch's
# share/cmake folder. Sets what find_package(Torch) sets and qkv reads:
# Torch_FOUND, Torch_VERSION, TORCH_INSTALL_PREFIX, TORCH_INCLUDE_DIRS,
# TORCH_LIBRARIES, TORCH_CXX_FLAGS, and TORCH_CUDA_LIBRARIES empty.
macro(qkv_torch_cpu_part prefix version cxx11_abi)
  # The targets that torch's package makes from the CUDA toolkit, MKL and
  # protobuf: placeholders here (the wheel's libraries hold or load them).
  file(STRINGS "${prefix}/Caffe2/Caffe2Targets.cmake" qkv_torch_links REGEX "INTERFACE_LINK_LIBRARIES")
  string(REGEX MATCHALL "[A-Za-z0-9_]+::[A-Za-z0-9_]+" qkv_torch_external "${qkv_torch_links}")
  list(REMOVE_DUPLICATES qkv_torch_external)
  foreach(name ${qkv_torch_external})
    if(NOT TARGET ${name})
      add_library(${name} INTERFACE IMPORTED)
    endif()
  endforeach()
  include("${prefix}/Caffe2/Caffe2Targets.cmake")
  get_filename_component(TORCH_INSTALL_PREFIX "${prefix}/../.." ABSOLUTE)
  set(TORCH_INCLUDE_DIRS ${TORCH_INSTALL_PREFIX}/include ${TORCH_INSTALL_PREFIX}/include/torch/csrc/api/include)
  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${cxx11_abi}")
  # torch without torch_cuda: its CUDA definitions (NCCL's) go with it.
  set_target_properties(torch PROPERTIES INTERFACE_LINK_LIBRARIES torch_cpu_library
                                         INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
                                         INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}")
  find_library(c10_LIBRARY c10 PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(TORCH_LIBRARY torch PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH REQUIRED)
  set(TORCH_LIBRARIES torch torch_library ${c10_LIBRARY})
  set(TORCH_CUDA_LIBRARIES "")
  set(Torch_VERSION ${version})
  set(Torch_FOUND TRUE)
  # Where find_package(Torch) records the package (setup.py reads it to keep
  # a folder's settings for the same torch).
  set(Torch_DIR "${prefix}/Torch" CACHE PATH "The directory containing a CMake configuration file for Torch.")
endmacro()
