/*
 * env.c - the environment-driven session: etch_init() records the whole run
 * into the file named by ETCH_OUT, configured by the other ETCH_* variables,
 * and etch_shutdown() (or exit) writes it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdk/sdk.h"

/* ---- the environment session ------------------------------------------------- */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static bool env_inited;
static etch_session *env_session;
static pid_t env_pid;

void etch__session_atfork_child(void) {
  pthread_mutex_init(&env_lock, NULL);
  env_session = NULL; /* the parent's; never touched here */
}

static void env_atexit(void) {
  if (getpid() != env_pid) return;
  etch_shutdown();
}

static int env_set(etch_config *cfg, const char *var, const char *key) {
  const char *v = getenv(var);
  if (!v) return ETCH_OK;
  int rc = etch_config_set(cfg, key, v);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    return etch__error(rc, "%s: %s", var, msg);
  }
  return ETCH_OK;
}

int etch_init(void) {
  etch__global_init();
  pthread_mutex_lock(&env_lock);
  if (env_inited) {
    pthread_mutex_unlock(&env_lock);
    return ETCH_OK;
  }
  env_inited = true;
  const char *out = getenv("ETCH_OUT");
  if (!out || !*out) {
    pthread_mutex_unlock(&env_lock);
    return ETCH_OK;
  }
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc == ETCH_OK) {
    const char *text = getenv("ETCH_CONFIG");
    if (text) {
      rc = etch_config_parse(cfg, text);
      if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", etch_last_error());
        etch__error(rc, "ETCH_CONFIG: %s", msg);
      }
    }
    if (!rc) rc = env_set(cfg, "ETCH_CATEGORIES", "categories");
    if (!rc) rc = env_set(cfg, "ETCH_BUFFER_KB", "buffer_kb");
    if (!rc) rc = env_set(cfg, "ETCH_FILL", "fill");
    if (!rc) rc = env_set(cfg, "ETCH_DURATION_MS", "duration_ms");
    if (!rc) rc = env_set(cfg, "ETCH_COMPRESSION", "compression");
    if (!rc) rc = etch_config_set(cfg, "output", out);
    etch_session *s = NULL;
    if (!rc) rc = etch_session_new(cfg, &s);
    if (!rc) rc = etch_session_start(s);
    if (!rc) {
      env_session = s;
      env_pid = getpid();
      atexit(env_atexit);
    } else if (s) {
      etch_session_free(s);
    }
    etch_config_free(cfg);
  }
  pthread_mutex_unlock(&env_lock);
  if (rc) fprintf(stderr, "etch: not tracing: %s\n", etch_last_error());
  return rc;
}

int etch_shutdown(void) {
  pthread_mutex_lock(&env_lock);
  etch_session *s = env_session;
  env_session = NULL;
  pthread_mutex_unlock(&env_lock);
  if (!s) return ETCH_OK;
  int rc = etch_session_stop(s);
  if (rc) fprintf(stderr, "etch: %s\n", etch_last_error());
  etch_session_free(s);
  return rc;
}
