/*
 * fuzz_config.c - libFuzzer target for trace configs: any text given to
 * etch_config_parse gives ETCH_OK or an error with a message, never a crash;
 * whatever was accepted still makes a session that starts, records, stops
 * and serialises.
 */
#include <etch/etch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ETCH_CATEGORY_DEFINE(fuzz, "fuzz", "", "");

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  etch_config *cfg;
  if (etch_config_new(&cfg) != ETCH_OK) {
    free(text);
    return 0;
  }
  int rc = etch_config_parse(cfg, text);
  if (rc != ETCH_OK && etch_last_error()[0] == '\0') abort();
  /* Keep sessions small and quick whatever the input asked for. */
  etch_config_set(cfg, "buffer_kb", "64");
  etch_config_set(cfg, "duration_ms", "0");
  etch_config_set(cfg, "output", "/dev/null");
  etch_session *s;
  if (etch_session_new(cfg, &s) == ETCH_OK) {
    if (etch_session_start(s) == ETCH_OK) {
      ETCH_INSTANT(fuzz, "event", ETCH_ARG_INT("n", (int64_t)size));
      etch_session_stop(s);
      uint8_t *out;
      size_t len;
      if (etch_session_read(s, &out, &len) == ETCH_OK) etch_free(out);
    }
    etch_session_free(s);
  }
  etch_config_free(cfg);
  free(text);
  return 0;
}
