// api_cxx_run.cpp - the instrumentation macros used from C++ (the code of
// api_macros.c, compiled as C++) record the events they should.
#include <etch/etch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "api_macros.c"

static int failures = 0;

static void check(bool ok, const char *what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

static bool has(const std::string &trace, const char *s) {
  return trace.find(s) != std::string::npos;
}

int main() {
  etch_config *cfg = NULL;
  etch_session *s = NULL;
  if (etch_config_new(&cfg) != ETCH_OK ||
      etch_config_parse(cfg, "categories=api_render,api_dynamic;"
                             "compression=none") != ETCH_OK ||
      etch_session_new(cfg, &s) != ETCH_OK || etch_session_start(s) != ETCH_OK) {
    std::printf("FAIL session: %s\n", etch_last_error());
    return 1;
  }
  etch_config_free(cfg);
  check(etch_category_enabled(&ETCH_CAT(api_render)), "api_render enabled");
  check(!etch_category_enabled(&ETCH_CAT(api_debug)), "api_debug disabled");
  int r = api_use_all_macros(2, "runtime name");
  check(r == 3 + 1, "api_use_all_macros result");
  check(etch_session_stop(s) == ETCH_OK, "stop");
  uint8_t *data = NULL;
  size_t len = 0;
  check(etch_session_read(s, &data, &len) == ETCH_OK, "read");
  std::string trace(reinterpret_cast<const char *>(data), len);
  etch_free(data);
  etch_session_free(s);

  check(len > 0 && static_cast<unsigned char>(trace[0]) == 0x0a,
        "trace starts with a TracePacket (0x0A)");
  check(has(trace, "api_render"), "category name");
  check(has(trace, "slice with everything"), "slice name");
  check(has(trace, "runtime name"), "ETCH_NAME / dynamic name");
  check(has(trace, "recurse"), "ETCH_SCOPE name");
  check(has(trace, "api async"), "ETCH_TRACK track");
  check(has(trace, "dynamic instant with args"), "ETCH_INSTANT_C");
  check(has(trace, "in an if without braces"), "macro as a branch body");
  check(!has(trace, "in the else"), "untaken branch");
  check(!has(trace, "debug instant"), "disabled category writes nothing");

  const char *dir = std::getenv("ETCH_TEST_OUT");
  if (dir && *dir) {
    std::string path = std::string(dir) + "/api_cxx_run.pftrace";
    if (FILE *f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(trace.data(), 1, trace.size(), f);
      std::fclose(f);
    }
  }
  std::printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
