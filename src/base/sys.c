/*
 * sys.c - the table of system calls (see sys.h).
 */
#define _GNU_SOURCE
#include "base/sys.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* open() takes its mode as a variadic argument: a function of the table's
 * type around it. */
static int sys_open(const char *path, int flags, mode_t mode) {
  return open(path, flags, mode);
}

const etch__sys_calls etch__sys_libc = {
    .open = sys_open,
    .read = read,
    .pread = pread,
    .write = write,
    .pwrite = pwrite,
    .ftruncate = ftruncate,
    .fsync = fsync,
    .mmap = mmap,
    .rename = rename,
    .mkdir = mkdir,
    .unlink = unlink,
};

etch__sys_calls etch__sys_table = {
    .open = sys_open,
    .read = read,
    .pread = pread,
    .write = write,
    .pwrite = pwrite,
    .ftruncate = ftruncate,
    .fsync = fsync,
    .mmap = mmap,
    .rename = rename,
    .mkdir = mkdir,
    .unlink = unlink,
};

void etch__sys_reset(void) { etch__sys_table = etch__sys_libc; }

static const char *const kNames[ETCH__SYS_CALLS] = {
    "open",  "read", "pread",  "write", "pwrite", "ftruncate",
    "fsync", "mmap", "rename", "mkdir", "unlink",
};
_Static_assert(ETCH__SYS_CALLS == 11, "a name for each call of the table");

const char *etch__sys_name(int i) {
  return i >= 0 && i < ETCH__SYS_CALLS ? kNames[i] : NULL;
}

void (**etch__sys_slot(etch__sys_calls *t, int i))(void) {
  ETCH_DCHECK(i >= 0 && i < ETCH__SYS_CALLS);
  return (void (**)(void))((char *)t + (size_t)i * sizeof(void (*)(void)));
}
