# FindDuckDB.cmake - the DuckDB shared library the query part links.
#
# A libduckdb installed on the system comes first (other distributions
# package it); else the one scripts/setup.sh unpacked into .deps/duckdb/ of
# the checkout. No header is needed: etch declares the C API functions it
# uses itself (src/query/duckdb_api.h). DUCKDB_LIBRARY may name the library
# by hand. Defines the imported target DuckDB::duckdb and says which library
# it found.
find_library(DUCKDB_LIBRARY NAMES duckdb)
set(_etch_duckdb_where "the system")
if(NOT DUCKDB_LIBRARY)
  unset(DUCKDB_LIBRARY CACHE)
  find_library(DUCKDB_LIBRARY NAMES duckdb
               PATHS ${PROJECT_SOURCE_DIR}/.deps/duckdb NO_DEFAULT_PATH)
  set(_etch_duckdb_where "scripts/setup.sh's download")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DuckDB
  REQUIRED_VARS DUCKDB_LIBRARY
  REASON_FAILURE_MESSAGE "run scripts/setup.sh (it fetches DuckDB's library), or set DUCKDB_LIBRARY")

if(DuckDB_FOUND AND NOT TARGET DuckDB::duckdb)
  add_library(DuckDB::duckdb SHARED IMPORTED GLOBAL)
  set_target_properties(DuckDB::duckdb PROPERTIES
                        IMPORTED_LOCATION "${DUCKDB_LIBRARY}"
                        IMPORTED_NO_SONAME FALSE)
  message(STATUS "DuckDB: ${DUCKDB_LIBRARY} (from ${_etch_duckdb_where})")
endif()
