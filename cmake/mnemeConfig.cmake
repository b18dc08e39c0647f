# find_package(mneme CONFIG): recordable CUDA targets with mneme-cc.
#
#   find_package(mneme CONFIG REQUIRED)   # -Dmneme_DIR=$(mneme config cmakedir)
#   add_mneme(my_app)
#
# add_mneme(target) makes the target recordable: its CUDA sources are
# compiled with the mneme pass plugin (unless the CUDA compiler already is
# mneme-nvcc or mneme-cxx, which add it themselves) and it links the shared
# CUDA runtime, which the recorder interposes.  The CUDA compiler must be
# mneme-nvcc (which CMake drives as nvcc: nothing else is needed), mneme-cxx
# or clang 22; configure with -DCMAKE_CUDA_COMPILER=$(mneme config cxx)
# for clang's.

get_filename_component(_mneme_pkg_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
file(READ "${_mneme_pkg_dir}/build_info.json" _mneme_info)
string(JSON mneme_VERSION GET "${_mneme_info}" version)
string(JSON _mneme_plugin GET "${_mneme_info}" plugin)
string(JSON MNEME_LLVM_MAJOR GET "${_mneme_info}" llvm_major)
if(_mneme_plugin)
  set(MNEME_PLUGIN "${_mneme_pkg_dir}/lib/${_mneme_plugin}")
else()
  set(MNEME_PLUGIN "")
endif()
set(MNEME_COMPAT_INCLUDE_DIR "${_mneme_pkg_dir}/compat/include")
find_program(MNEME_CXX mneme-cxx)

function(add_mneme target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "add_mneme: ${target} is not a target")
  endif()
  if(NOT MNEME_PLUGIN)
    message(FATAL_ERROR "add_mneme: the mneme pass plugin was not built "
      "(install llvm-${MNEME_LLVM_MAJOR}-dev and reinstall mneme-cc)")
  endif()
  get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  get_filename_component(_compiler_name "${CMAKE_CUDA_COMPILER}" NAME)
  if("CUDA" IN_LIST _languages AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
     AND _compiler_name STREQUAL "mneme-nvcc")
    # CMake drives mneme-nvcc as nvcc: its device-link step and its links
    # through the host compiler work as they are.
    set_property(TARGET ${target} PROPERTY CUDA_RUNTIME_LIBRARY Shared)
  elseif("CUDA" IN_LIST _languages)
    if(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "add_mneme(${target}): the CUDA compiler is "
        "${CMAKE_CUDA_COMPILER_ID}; mneme needs clang ${MNEME_LLVM_MAJOR}: "
        "configure with -DCMAKE_CUDA_COMPILER=${MNEME_CXX}")
    endif()
    string(REGEX MATCH "^[0-9]+" _major "${CMAKE_CUDA_COMPILER_VERSION}")
    if(NOT _major EQUAL MNEME_LLVM_MAJOR)
      message(FATAL_ERROR "add_mneme(${target}): the CUDA compiler is clang "
        "${_major}; the mneme plugin needs clang ${MNEME_LLVM_MAJOR}")
    endif()
    # mneme-cxx adds these itself; a plain clang needs them here.
    if(NOT _compiler_name STREQUAL "mneme-cxx")
      target_compile_options(${target} PRIVATE
        "$<$<COMPILE_LANGUAGE:CUDA>:-fpass-plugin=${MNEME_PLUGIN};-Wno-unknown-cuda-version;SHELL:-idirafter ${MNEME_COMPAT_INCLUDE_DIR}>")
      # A plain clang links relocatable device code only when told; the
      # module linked from its IR needs mneme's drivers (docs/embedded-ir.md).
      target_link_options(${target} PRIVATE
        "$<$<AND:$<LINK_LANGUAGE:CUDA>,$<BOOL:$<TARGET_PROPERTY:CUDA_SEPARABLE_COMPILATION>>>:-fgpu-rdc>")
    endif()
    set_property(TARGET ${target} PROPERTY CUDA_RUNTIME_LIBRARY Shared)
    # With CUDA_SEPARABLE_COMPILATION, clang links the device code at the
    # program's link (and mneme's drivers link its IR there); CMake's own
    # device-link step runs the toolkit's fatbinary with an option CUDA 13
    # no longer has.
    set_property(TARGET ${target} PROPERTY CUDA_RESOLVE_DEVICE_SYMBOLS OFF)
    # A program of C++ sources is linked by the C++ compiler, which does no
    # device link for the separable-compilation CUDA libraries it links;
    # mneme's drivers do it, so they link the target (unless it says otherwise).
    get_target_property(_type ${target} TYPE)
    get_target_property(_linker_language ${target} LINKER_LANGUAGE)
    if(_compiler_name STREQUAL "mneme-cxx" AND NOT _linker_language
       AND _type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      set_property(TARGET ${target} PROPERTY LINKER_LANGUAGE CUDA)
    endif()
  else()
    # CUDA sources compiled as C++ by mneme-cxx (CXX=mneme-cxx): the driver
    # adds the plugin; the shared runtime must still be linked.
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
  endif()
endfunction()
