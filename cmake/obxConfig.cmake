# find_package(obx): the imported targets obx::obx and ibx::ibx of an
# installed obx.h / ibx.h (installed by `make install` or `cmake --install`).
include(CMakeFindDependencyMacro)
find_dependency(ODBC)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_dependency(Threads)
# <prefix>/share/cmake/obx/obxConfig.cmake: the prefix is three levels up.
get_filename_component(_obx_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
foreach(_obx_lib obx ibx)
  if(NOT TARGET ${_obx_lib}::${_obx_lib})
    add_library(${_obx_lib}::${_obx_lib} INTERFACE IMPORTED)
    set_target_properties(${_obx_lib}::${_obx_lib} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_obx_prefix}/include"
      INTERFACE_LINK_LIBRARIES "ODBC::ODBC;Threads::Threads")
  endif()
endforeach()
unset(_obx_lib)
unset(_obx_prefix)
