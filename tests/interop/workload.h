/*
 * workload.h - the interop producers' workload, the same for the libetch
 * producer (ip_etch.c) and the Perfetto SDK one (ip_perfetto.c), so that
 * their traces give the same tables in trace_processor (interop.py checks
 * what each run must contain from these numbers).
 *
 *   PRODUCER NAME THREADS ITERS [exit|stay]
 *
 * The producer connects to the tracing service named by
 * PERFETTO_PRODUCER_SOCK_NAME, waits (at most WAIT_MS) for the service to
 * enable category "interop", prints "started PID" on stdout, and has each of
 * THREADS threads (named "worker-T") do ITERS iterations i of:
 *
 *   slice "outer" {debug.i = i}, with flow id FLOW_ID(pid, T, i / 2): begun
 *     at even i, ended (terminating) at odd i
 *     slice "inner" nested in it
 *   every 10th i: instant "mark" {debug.s = "x", debug.d = 0.5, debug.b = true}
 *   counter "level-T" (a counter track of the process) = i
 *
 * then prints "emitted" and, with "exit" (the default), returns from main
 * at once: what reaches the service is what the SDK sends on its way out.
 * With "stay" it waits (at most WAIT_MS) for the service to disable the
 * category before it exits. With ITERS = 0 the threads iterate until the
 * category is disabled (a session that the consumer stops early), and
 * thread 0 prints "busy" after its first 1000 iterations.
 */
#ifndef ETCH_INTEROP_WORKLOAD_H
#define ETCH_INTEROP_WORKLOAD_H

#define WL_CATEGORY "interop"
#define WL_WAIT_MS 60000
#define WL_MAX_THREADS 16
/* Unique across processes and threads; odd ids stay clear of 0. */
#define WL_FLOW_ID(pid, t, k) \
  ((((uint64_t)(pid)) << 32) | ((uint64_t)(t) << 24) | ((uint64_t)(k) << 1) | 1u)

#endif
