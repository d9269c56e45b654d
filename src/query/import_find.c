/*
 * import_find.c - the importer's processes, threads and tracks by key: a
 * process, a thread or a track looked up by its key on its machine (open
 * addressing over a u64 map: a key taken by another machine's entry moves
 * on to the next one), and a process or thread made when new. import.c,
 * import_write.c, import_stats.c and import_samples.c use them; they call
 * nothing else of the importer's.
 */
#include "query/import_int.h"

bool etch__imp_find_proc(const etch__importer *imp, uint32_t machine,
                         int32_t pid, int64_t *idx, uint64_t *free_key) {
  uint64_t key = etch__imp_machine_key((uint32_t)pid, machine);
  for (;; key++) {
    if (!etch__u64map_get(&imp->proc_by_pid, key, idx)) break;
    const qproc *p = &imp->procs[*idx];
    if (p->machine == machine && p->pid == pid) return true;
  }
  if (free_key) *free_key = key;
  return false;
}

bool etch__imp_find_thread(const etch__importer *imp, uint32_t machine,
                           int32_t pid, int32_t tid, int64_t *idx,
                           uint64_t *free_key) {
  uint64_t key = etch__imp_machine_key(
      (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, machine);
  for (;; key++) {
    if (!etch__u64map_get(&imp->thread_by_key, key, idx)) break;
    const qthread *t = &imp->threads[*idx];
    if (t->machine == machine && t->pid == pid && t->tid == tid) return true;
  }
  if (free_key) *free_key = key;
  return false;
}

bool etch__imp_find_track(const etch__importer *imp, uint32_t machine,
                          uint64_t uuid, int64_t *idx, uint64_t *free_key) {
  uint64_t key = etch__imp_machine_key(uuid, machine);
  for (;; key++) {
    if (!etch__u64map_get(&imp->track_by_uuid, key, idx)) break;
    const qtrack *t = &imp->tracks[*idx];
    if (t->machine == machine && t->uuid == uuid) return true;
  }
  if (free_key) *free_key = key;
  return false;
}

int64_t etch__imp_upid(etch__importer *imp, uint32_t machine, int32_t pid) {
  int64_t idx;
  uint64_t key;
  if (etch__imp_find_proc(imp, machine, pid, &idx, &key)) return idx + 1;
  if (!grow_array((void **)&imp->procs, &imp->cap_procs, imp->nprocs + 1,
                  sizeof *imp->procs) ||
      !etch__u64map_put(&imp->proc_by_pid, key, (int64_t)imp->nprocs)) {
    fail_nomem(imp);
    return 0;
  }
  imp->procs[imp->nprocs] = (qproc){.machine = machine, .pid = pid};
  return (int64_t)++imp->nprocs;
}

int64_t etch__imp_utid(etch__importer *imp, uint32_t machine, int32_t pid,
                       int32_t tid) {
  int64_t idx;
  uint64_t key;
  if (etch__imp_find_thread(imp, machine, pid, tid, &idx, &key))
    return idx + 1;
  if (!grow_array((void **)&imp->threads, &imp->cap_threads,
                  imp->nthreads + 1, sizeof *imp->threads) ||
      !etch__u64map_put(&imp->thread_by_key, key, (int64_t)imp->nthreads)) {
    fail_nomem(imp);
    return 0;
  }
  imp->threads[imp->nthreads] =
      (qthread){.machine = machine, .pid = pid, .tid = tid};
  return (int64_t)++imp->nthreads;
}
