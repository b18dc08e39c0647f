# Any mneme-cc satisfies a request for the same major version.
get_filename_component(_mneme_pkg_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
file(READ "${_mneme_pkg_dir}/build_info.json" _mneme_info)
string(JSON PACKAGE_VERSION GET "${_mneme_info}" version)
if(PACKAGE_FIND_VERSION AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
