# install.cmake - what `cmake --install` puts where:
#
#   include/etch/*.h                        public headers
#   lib/libetch.so.X.Y.Z, libetch.a         the SDK (shared + static)
#   lib/libetch_reader.so..., .a            the reader, if built
#   lib/pkgconfig/etch.pc, etch-reader.pc   pkg-config files
#   lib/cmake/etch/etchConfig*.cmake        find_package(etch), targets
#                                           etch::etch, etch::etch_static,
#                                           etch::etch_reader[_static]
#
# Included at the end of the top-level CMakeLists.txt, after every target
# exists. Programs (etch, etchd) install themselves.
include(CMakePackageConfigHelpers)

set(ETCH_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/etch)
set(ETCH_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/etch
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# ---- what each library needs when linked statically ---------------------------
#
# Read from the targets' link libraries, so that a new dependency of a part
# shows up in the .pc and config files without editing this file. Maps a
# link item to a pkg-config module, a Libs.private flag and a CMake
# dependency lookup.
function(etch_link_deps target out_requires out_libs out_cmake out_exportable)
  get_target_property(libs ${target} LINK_LIBRARIES)
  get_target_property(ilibs ${target} INTERFACE_LINK_LIBRARIES)
  set(req "")
  set(flags "")
  set(cm "")
  set(ok TRUE)
  foreach(l IN LISTS libs ilibs)
    if(l STREQUAL "" OR l MATCHES "-NOTFOUND$")
      continue()
    endif()
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" l "${l}")
    if(l STREQUAL "Threads::Threads")
      list(APPEND flags -lpthread)
      list(APPEND cm "find_dependency(Threads)")
    elseif(l STREQUAL "ZLIB::ZLIB")
      list(APPEND req zlib)
      list(APPEND cm "find_dependency(ZLIB)")
    elseif(l MATCHES "^PkgConfig::(.+)$")
      string(TOLOWER "${CMAKE_MATCH_1}" mod)
      set(var ${CMAKE_MATCH_1})
      if(mod STREQUAL "zstd")
        set(mod libzstd)
      endif()
      list(APPEND req ${mod})
      list(APPEND cm "find_dependency(PkgConfig)"
        "if(NOT TARGET PkgConfig::${var})\n  pkg_check_modules(${var} REQUIRED QUIET IMPORTED_TARGET ${mod})\nendif()")
    elseif(l MATCHES "^(m|dl|rt|pthread)$")
      list(APPEND flags -l${l})
    elseif(l MATCHES "^-l")
      list(APPEND flags ${l})
    elseif(l MATCHES "^etch(_static)?$")
      list(APPEND req etch)
    elseif(TARGET ${l})
      # Some other target of this tree (e.g. an object library): cannot be
      # exported as a dependency.
      get_target_property(imported ${l} IMPORTED)
      if(NOT imported)
        set(ok FALSE)
      endif()
    endif()
  endforeach()
  foreach(v req flags cm)
    if(${v})
      list(REMOVE_DUPLICATES ${v})
    endif()
  endforeach()
  string(REPLACE ";" ", " req "${req}")
  string(REPLACE ";" " " flags "${flags}")
  set(${out_requires} "${req}" PARENT_SCOPE)
  set(${out_libs} "${flags}" PARENT_SCOPE)
  set(${out_cmake} "${cm}" PARENT_SCOPE)
  set(${out_exportable} ${ok} PARENT_SCOPE)
endfunction()

# ---- libraries -------------------------------------------------------------------

set(etch_export_targets etch etch_static)
set(etch_config_deps "")
etch_link_deps(etch_static etch_req etch_libs etch_cm etch_ok)
list(APPEND etch_config_deps ${etch_cm})

set(etch_reader_targets "")
if(TARGET etch_reader)
  list(APPEND etch_reader_targets etch_reader)
endif()
if(TARGET etch_reader_static)
  list(APPEND etch_reader_targets etch_reader_static)
endif()
set(reader_req "")
set(reader_libs "")
foreach(t ${etch_reader_targets})
  etch_link_deps(${t} r_req r_libs r_cm r_ok)
  if(r_ok)
    list(APPEND etch_export_targets ${t})
    list(APPEND etch_config_deps ${r_cm})
  else()
    message(STATUS "etch: ${t} links a non-exported target; installed "
                   "without a CMake export")
    install(TARGETS ${t}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
  if(t STREQUAL "etch_reader_static" OR NOT reader_req)
    set(reader_req "${r_req}")
    set(reader_libs "${r_libs}")
  endif()
endforeach()

install(TARGETS ${etch_export_targets} EXPORT etchTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT etchTargets NAMESPACE etch:: DESTINATION ${ETCH_CMAKE_DIR})

# ---- CMake package ---------------------------------------------------------------

if(etch_config_deps)
  list(REMOVE_DUPLICATES etch_config_deps)
endif()
string(REPLACE ";" "\n" ETCH_CONFIG_DEPENDENCIES "${etch_config_deps}")
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/etchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/etchConfig.cmake
  INSTALL_DESTINATION ${ETCH_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a new minor version may break the API.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/etchConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/etchConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/etchConfigVersion.cmake
        DESTINATION ${ETCH_CMAKE_DIR})

# ---- pkg-config ------------------------------------------------------------------
#
# The .pc files name the prefix given at install time (cmake --install
# --prefix P), not only the one chosen at configure time: they are written
# from the template by the install step itself.
function(etch_install_pc template name requires libs)
  set(staged ${PROJECT_BINARY_DIR}/cmake/${name}.pc.staged)
  set(ETCH_PC_PREFIX "@ETCH_PC_PREFIX@")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(ETCH_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  else()
    set(ETCH_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    set(ETCH_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
  else()
    set(ETCH_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  set(ETCH_PC_REQUIRES_PRIVATE "${requires}")
  set(ETCH_PC_LIBS_PRIVATE "${libs}")
  configure_file(${template} ${staged} @ONLY)
  install(CODE "
    set(ETCH_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${staged}\" \"${PROJECT_BINARY_DIR}/cmake/${name}.pc\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${ETCH_PC_DIR}\"
         TYPE FILE FILES \"${PROJECT_BINARY_DIR}/cmake/${name}.pc\")")
endfunction()

etch_install_pc(${PROJECT_SOURCE_DIR}/cmake/etch.pc.in etch "${etch_req}"
                "${etch_libs}")
if(etch_reader_targets)
  etch_install_pc(${PROJECT_SOURCE_DIR}/cmake/etch-reader.pc.in etch-reader
                  "${reader_req}" "${reader_libs}")
endif()
