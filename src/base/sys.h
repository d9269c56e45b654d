/*
 * sys.h - the system calls etch makes on its files, through one table of
 * function pointers (etch__sys_table) that a test can change, as SQLite's
 * os layer lets a test replace its system calls: a test puts in its own
 * write() that fails the third call with ENOSPC, and sees what the sink,
 * the flight file, the store or the query cache do about it
 * (tests/fault/sysfault.h sweeps that way over every call in turn).
 *
 * The table starts out holding the C library's functions, and nothing but
 * a test changes it. The cost, armed or not, is one load of the pointer
 * and an indirect call: these are calls on files (a trace write, a flight
 * file's setup, a cache or store file), never one per event; the writer's
 * hot path makes none of them.
 *
 * Where they are used and not (docs/building.md, "System call failure"):
 * the trace file's sink (buffer/sink.c), the flight file
 * (buffer/flight.c), libetch's output at exit and as it goes
 * (sdk/core/output.c, stream.c), the query cache (query/cache.c) and the
 * store's files (ui/store.c); not the service's own files, the reader's
 * open of a trace or the tools' files.
 */
#ifndef ETCH_BASE_SYS_H
#define ETCH_BASE_SYS_H

#include <stddef.h>
#include <sys/types.h>

#include "base/base.h"

typedef struct etch__sys_calls {
  int (*open)(const char *path, int flags, mode_t mode);
  ssize_t (*read)(int fd, void *buf, size_t n);
  ssize_t (*pread)(int fd, void *buf, size_t n, off_t at);
  ssize_t (*write)(int fd, const void *buf, size_t n);
  ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t at);
  int (*ftruncate)(int fd, off_t len);
  int (*fsync)(int fd);
  void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd,
                off_t at);
  int (*rename)(const char *from, const char *to);
  int (*mkdir)(const char *path, mode_t mode);
  int (*unlink)(const char *path);
} etch__sys_calls;

/* The table every wrapper below calls through. */
extern ETCH_HIDDEN etch__sys_calls etch__sys_table;

/* The C library's functions, as the table starts out (a test's
 * replacement calls these to do the real thing). */
extern const etch__sys_calls etch__sys_libc;

/* The table back to the C library's. */
void etch__sys_reset(void);

/* The calls by name, for a test's sweep: the number of them, the name of
 * the ith ("open", "write", ...), and the slot of the ith in a table. */
enum { ETCH__SYS_CALLS = sizeof(etch__sys_calls) / sizeof(void (*)(void)) };
const char *etch__sys_name(int i);
void (**etch__sys_slot(etch__sys_calls *t, int i))(void);

/* The wrappers: the same arguments and results as the calls (open always
 * takes the mode). */
ETCH_INLINE int etch__sys_open(const char *path, int flags, mode_t mode) {
  return etch__sys_table.open(path, flags, mode);
}
ETCH_INLINE ssize_t etch__sys_read(int fd, void *buf, size_t n) {
  return etch__sys_table.read(fd, buf, n);
}
ETCH_INLINE ssize_t etch__sys_pread(int fd, void *buf, size_t n, off_t at) {
  return etch__sys_table.pread(fd, buf, n, at);
}
ETCH_INLINE ssize_t etch__sys_write(int fd, const void *buf, size_t n) {
  return etch__sys_table.write(fd, buf, n);
}
ETCH_INLINE ssize_t etch__sys_pwrite(int fd, const void *buf, size_t n,
                                     off_t at) {
  return etch__sys_table.pwrite(fd, buf, n, at);
}
ETCH_INLINE int etch__sys_ftruncate(int fd, off_t len) {
  return etch__sys_table.ftruncate(fd, len);
}
ETCH_INLINE int etch__sys_fsync(int fd) { return etch__sys_table.fsync(fd); }
ETCH_INLINE void *etch__sys_mmap(void *addr, size_t len, int prot, int flags,
                                 int fd, off_t at) {
  return etch__sys_table.mmap(addr, len, prot, flags, fd, at);
}
ETCH_INLINE int etch__sys_rename(const char *from, const char *to) {
  return etch__sys_table.rename(from, to);
}
ETCH_INLINE int etch__sys_mkdir(const char *path, mode_t mode) {
  return etch__sys_table.mkdir(path, mode);
}
ETCH_INLINE int etch__sys_unlink(const char *path) {
  return etch__sys_table.unlink(path);
}

#endif /* ETCH_BASE_SYS_H */
