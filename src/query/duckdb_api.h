/*
 * duckdb_api.h - the part of DuckDB's C API the query part calls, declared
 * by etch from DuckDB's documented C API (types, values of the enums, the
 * functions' signatures). No DuckDB header is needed to build etch: only
 * the shared library (cmake/FindDuckDB.cmake). Only the query part and the
 * tools include this; libetch never does.
 *
 * Handles are pointers to opaque structs. duckdb_result is the one struct
 * whose size matters (callers hold it): six pointer-sized fields, read only
 * through functions.
 */
#ifndef ETCH_QUERY_DUCKDB_API_H
#define ETCH_QUERY_DUCKDB_API_H

#include <stdbool.h>
#include <stdint.h>

typedef uint64_t idx_t;

typedef enum {
  DuckDBSuccess = 0,
  DuckDBError = 1
} duckdb_state;

/* Column types (duckdb_type); only the values etch looks at. */
enum {
  DUCKDB_TYPE_INVALID = 0,
  DUCKDB_TYPE_BOOLEAN = 1,
  DUCKDB_TYPE_TINYINT = 2,
  DUCKDB_TYPE_SMALLINT = 3,
  DUCKDB_TYPE_INTEGER = 4,
  DUCKDB_TYPE_BIGINT = 5,
  DUCKDB_TYPE_UTINYINT = 6,
  DUCKDB_TYPE_USMALLINT = 7,
  DUCKDB_TYPE_UINTEGER = 8,
  DUCKDB_TYPE_UBIGINT = 9,
  DUCKDB_TYPE_FLOAT = 10,
  DUCKDB_TYPE_DOUBLE = 11,
  DUCKDB_TYPE_HUGEINT = 16,
  DUCKDB_TYPE_VARCHAR = 17,
  DUCKDB_TYPE_BLOB = 18,
  DUCKDB_TYPE_DECIMAL = 19,
  DUCKDB_TYPE_UHUGEINT = 32,
};
typedef int duckdb_type;

typedef struct duckdb__database *duckdb_database;
typedef struct duckdb__connection *duckdb_connection;
typedef struct duckdb__config *duckdb_config;
typedef struct duckdb__prepared *duckdb_prepared_statement;
typedef struct duckdb__extracted *duckdb_extracted_statements;
typedef struct duckdb__appender *duckdb_appender;
typedef struct duckdb__logical_type *duckdb_logical_type;
typedef struct duckdb__data_chunk *duckdb_data_chunk;
typedef struct duckdb__vector *duckdb_vector;

typedef struct {
  idx_t reserved_column_count, reserved_row_count, reserved_rows_changed;
  void *reserved_columns;
  char *reserved_error_message;
  void *internal_data;
} duckdb_result;

/* ---- database, connection, configuration ---------------------------------- */

duckdb_state duckdb_create_config(duckdb_config *out);
duckdb_state duckdb_set_config(duckdb_config config, const char *name,
                               const char *option);
void duckdb_destroy_config(duckdb_config *config);
/* `path` NULL or ":memory:": in memory. *out_error (duckdb_free) on error. */
duckdb_state duckdb_open_ext(const char *path, duckdb_database *out,
                             duckdb_config config, char **out_error);
void duckdb_close(duckdb_database *db);
duckdb_state duckdb_connect(duckdb_database db, duckdb_connection *out);
void duckdb_disconnect(duckdb_connection *con);
const char *duckdb_library_version(void);
void duckdb_free(void *ptr);

/* ---- queries and (materialized) results ------------------------------------ */

/* The result must be destroyed even when the query failed. */
duckdb_state duckdb_query(duckdb_connection con, const char *sql,
                          duckdb_result *out);
void duckdb_destroy_result(duckdb_result *result);
const char *duckdb_result_error(duckdb_result *result);
idx_t duckdb_column_count(duckdb_result *result);
idx_t duckdb_row_count(duckdb_result *result);
/* What a statement's result is: rows of a query, a count of changed rows,
 * or nothing. */
typedef enum {
  DUCKDB_RESULT_TYPE_INVALID = 0,
  DUCKDB_RESULT_TYPE_CHANGED_ROWS = 1,
  DUCKDB_RESULT_TYPE_NOTHING = 2,
  DUCKDB_RESULT_TYPE_QUERY_RESULT = 3,
} duckdb_result_type;
duckdb_result_type duckdb_result_return_type(duckdb_result result);
const char *duckdb_column_name(duckdb_result *result, idx_t col);
duckdb_type duckdb_column_type(duckdb_result *result, idx_t col);
bool duckdb_value_is_null(duckdb_result *result, idx_t col, idx_t row);
int64_t duckdb_value_int64(duckdb_result *result, idx_t col, idx_t row);
double duckdb_value_double(duckdb_result *result, idx_t col, idx_t row);
/* The value as text (any type); duckdb_free it. */
char *duckdb_value_varchar(duckdb_result *result, idx_t col, idx_t row);

/* Several statements in one text: split, then prepared one by one. */
idx_t duckdb_extract_statements(duckdb_connection con, const char *sql,
                                duckdb_extracted_statements *out);
const char *duckdb_extract_statements_error(duckdb_extracted_statements e);
duckdb_state duckdb_prepare_extracted_statement(
    duckdb_connection con, duckdb_extracted_statements e, idx_t index,
    duckdb_prepared_statement *out);
void duckdb_destroy_extracted(duckdb_extracted_statements *e);
duckdb_state duckdb_prepare(duckdb_connection con, const char *sql,
                            duckdb_prepared_statement *out);
const char *duckdb_prepare_error(duckdb_prepared_statement p);
duckdb_state duckdb_bind_varchar(duckdb_prepared_statement p, idx_t param,
                                 const char *val);
duckdb_state duckdb_bind_null(duckdb_prepared_statement p, idx_t param);
duckdb_state duckdb_bind_int64(duckdb_prepared_statement p, idx_t param,
                               int64_t val);
duckdb_state duckdb_execute_prepared(duckdb_prepared_statement p,
                                     duckdb_result *out);
void duckdb_destroy_prepare(duckdb_prepared_statement *p);
/* A result read a chunk at a time with duckdb_fetch_chunk (NULL at the
 * end or on an error), not held whole. */
duckdb_state duckdb_execute_prepared_streaming(duckdb_prepared_statement p,
                                               duckdb_result *out);
duckdb_data_chunk duckdb_fetch_chunk(duckdb_result result);
idx_t duckdb_data_chunk_get_size(duckdb_data_chunk chunk);

/* ---- appending data chunks ------------------------------------------------- */

duckdb_logical_type duckdb_create_logical_type(duckdb_type type);
void duckdb_destroy_logical_type(duckdb_logical_type *type);
duckdb_data_chunk duckdb_create_data_chunk(duckdb_logical_type *types,
                                           idx_t column_count);
void duckdb_destroy_data_chunk(duckdb_data_chunk *chunk);
void duckdb_data_chunk_reset(duckdb_data_chunk chunk);
void duckdb_data_chunk_set_size(duckdb_data_chunk chunk, idx_t size);
duckdb_vector duckdb_data_chunk_get_vector(duckdb_data_chunk chunk,
                                           idx_t col);
idx_t duckdb_data_chunk_get_column_count(duckdb_data_chunk chunk);
/* The type of a vector's column (duckdb_destroy_logical_type it). */
duckdb_logical_type duckdb_vector_get_column_type(duckdb_vector v);
duckdb_type duckdb_get_type_id(duckdb_logical_type type);
/* The rows a data chunk holds at most (2048 in DuckDB's builds). */
idx_t duckdb_vector_size(void);
void *duckdb_vector_get_data(duckdb_vector v);
uint64_t *duckdb_vector_get_validity(duckdb_vector v);
void duckdb_vector_ensure_validity_writable(duckdb_vector v);
void duckdb_validity_set_row_invalid(uint64_t *validity, idx_t row);
/* A VARCHAR cell of a vector: up to 12 bytes inline, else a pointer (to
 * the vector's string heap) after a 4-byte prefix. */
typedef struct {
  union {
    struct {
      uint32_t length;
      char prefix[4];
      char *ptr;
    } pointer;
    struct {
      uint32_t length;
      char inlined[12];
    } inlined;
  } value;
} duckdb_string_t;
/* Copies `len` bytes into the vector's string heap. */
void duckdb_vector_assign_string_element_len(duckdb_vector v, idx_t index,
                                             const char *s, idx_t len);

/* `catalog` NULL: the default database; `schema` NULL: main. */
duckdb_state duckdb_appender_create_ext(duckdb_connection con,
                                        const char *catalog,
                                        const char *schema, const char *table,
                                        duckdb_appender *out);
const char *duckdb_appender_error(duckdb_appender a);
duckdb_state duckdb_append_data_chunk(duckdb_appender a,
                                      duckdb_data_chunk chunk);
duckdb_state duckdb_appender_flush(duckdb_appender a);
duckdb_state duckdb_appender_close(duckdb_appender a);
duckdb_state duckdb_appender_destroy(duckdb_appender *a);

/* ---- table functions (a piped table writer's rows, table_writer.c) -------- */

typedef struct duckdb__value *duckdb_value;
typedef struct duckdb__table_function *duckdb_table_function;
typedef struct duckdb__bind_info *duckdb_bind_info;
typedef struct duckdb__init_info *duckdb_init_info;
typedef struct duckdb__function_info *duckdb_function_info;
typedef void (*duckdb_delete_callback_t)(void *data);

duckdb_table_function duckdb_create_table_function(void);
void duckdb_destroy_table_function(duckdb_table_function *f);
void duckdb_table_function_set_name(duckdb_table_function f, const char *name);
void duckdb_table_function_add_parameter(duckdb_table_function f,
                                         duckdb_logical_type type);
void duckdb_table_function_set_bind(duckdb_table_function f,
                                    void (*bind)(duckdb_bind_info info));
void duckdb_table_function_set_init(duckdb_table_function f,
                                    void (*init)(duckdb_init_info info));
void duckdb_table_function_set_function(
    duckdb_table_function f,
    void (*function)(duckdb_function_info info, duckdb_data_chunk output));
duckdb_state duckdb_register_table_function(duckdb_connection con,
                                            duckdb_table_function f);
/* The bind step: parameters in, the result's columns and bind data out. */
duckdb_value duckdb_bind_get_parameter(duckdb_bind_info info, idx_t index);
void duckdb_bind_add_result_column(duckdb_bind_info info, const char *name,
                                   duckdb_logical_type type);
void duckdb_bind_set_bind_data(duckdb_bind_info info, void *data,
                               duckdb_delete_callback_t destroy);
void duckdb_bind_set_error(duckdb_bind_info info, const char *error);
void duckdb_init_set_max_threads(duckdb_init_info info, idx_t max_threads);
void *duckdb_function_get_bind_data(duckdb_function_info info);
void duckdb_function_set_error(duckdb_function_info info, const char *error);
int64_t duckdb_get_int64(duckdb_value value);
void duckdb_destroy_value(duckdb_value *value);
/* `to` shares `from`'s data (and validity, and string heap). */
void duckdb_vector_reference_vector(duckdb_vector to, duckdb_vector from);

#endif /* ETCH_QUERY_DUCKDB_API_H */
