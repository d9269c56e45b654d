/*
 * writer.c - per-thread trace writers: the slow path behind every event.
 *
 * A writer is one thread's sequence in one session. Everything here runs out
 * of line: creating the writer, handing it chunks, framing packets that may
 * cross chunks, incremental-state resets (clock anchor, ClockSnapshot,
 * packet defaults, process and thread descriptors) and track descriptors.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/encode.h"
#include "sdk/core/sdk.h"

static pthread_key_t tls_key;

static void copy_name(char dst[64], const char *src) {
  size_t n = strnlen(src, 63);
  memcpy(dst, src, n);
  dst[n] = '\0';
}
static pthread_once_t tls_key_once = PTHREAD_ONCE_INIT;

/* The features' hooks (etch_feature_hooks): written once each under the
 * global lock, read without it (the count is published last). */
static const etch_feature_hooks *hooks[ETCH_MAX_FEATURE_HOOKS];
static uint32_t nhooks;

void etch__feature_hooks_add(const etch_feature_hooks *h) {
  pthread_mutex_lock(&etch__g.lock);
  uint32_t n = nhooks;
  bool have = false;
  for (uint32_t i = 0; i < n; i++) have |= hooks[i] == h;
  if (!have && n < ETCH_MAX_FEATURE_HOOKS) {
    hooks[n] = h;
    __atomic_store_n(&nhooks, n + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&etch__g.lock);
}

void etch__feature_hooks_before_stop(void) {
  uint32_t n = __atomic_load_n(&nhooks, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (hooks[i]->before_stop) hooks[i]->before_stop();
}

void etch__feature_hooks_stats(etch_session_stats *out) {
  uint32_t n = __atomic_load_n(&nhooks, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (hooks[i]->stats) hooks[i]->stats(out);
}

static void tls_destroy(void *arg) {
  (void)arg; /* &etch__tls of the exiting thread */
  /* Features first (memory tracing's last live-bytes counters), while
   * the thread's writers can still take them. */
  uint32_t n = __atomic_load_n(&nhooks, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (hooks[i]->thread_exit) hooks[i]->thread_exit();
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++) {
    etch_writer *w = etch__tls_writer(i);
    if (w) {
      etch__tls_forget(i);
      etch__writer_detach(w);
    }
  }
}

static void tls_key_create(void) { pthread_key_create(&tls_key, tls_destroy); }

/* ---- chunks ------------------------------------------------------------------ */

static void set_no_chunk(etch_writer *w) {
  w->chunk = NULL;
  w->payload = NULL;
  w->st.cur = w->st.end = w->st.seg = NULL;
  w->chunk_flags = 0;
  __atomic_store_n(&w->fast_end, 0, __ATOMIC_RELAXED);
}

/* Hands a chunk the writer is done with back to its session's backend. */
static void give_back(etch_writer *w, etch_chunk *c) {
  w->sess->backend->ops->complete(w->sess->backend, c);
}

/* Publishes and completes the current chunk. */
static void retire_chunk(etch_writer *w) {
  if (!w->chunk) return;
  /* Never while a packet holds it (packet_end settles those chunks). */
  ETCH_DCHECK(!w->in_packet && w->nheld == 0);
  ETCH_DCHECK(w->st.cur >= w->payload && w->st.cur <= w->st.end);
  etch__chunk_publish(w->chunk, (uint32_t)(w->st.cur - w->payload),
                      w->chunk_flags);
  give_back(w, w->chunk);
  set_no_chunk(w);
}

static bool take_chunk(etch_writer *w, uint32_t flags) {
  etch_backend *b = w->sess->backend;
  etch_chunk *c = b->ops->acquire(b, w->seq_id, w->next_chunk_id, flags);
  if (!c) return false;
  /* Every backend hands a chunk out being written, empty, with the ids and
   * flags asked for. */
  ETCH_DCHECK(__atomic_load_n(&c->state, __ATOMIC_RELAXED) ==
                  ETCH_CHUNK_WRITING &&
              c->writer_id == w->seq_id && c->chunk_id == w->next_chunk_id &&
              __atomic_load_n(&c->used, __ATOMIC_RELAXED) ==
                  flags << ETCH_CHUNK_FLAGS_SHIFT);
  w->next_chunk_id++;
  w->chunk = c;
  w->chunk_flags = flags;
  w->payload = b->payload_at ? (uint8_t *)c + b->payload_at
                             : etch__chunk_payload(c);
  w->pub_base = (uintptr_t)w->payload -
                ((uintptr_t)flags << ETCH_CHUNK_FLAGS_SHIFT);
  w->st.cur = w->payload;
  w->st.seg = w->payload;
  w->st.end = w->payload + b->payload_size;
  /* Seq-cst store, then the generation: either etch_session_free's zero
   * lands after this store, or this load sees its new generation. */
  __atomic_store_n(&w->fast_end, (uintptr_t)w->st.end - ETCH_FAST_MAX,
                   __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&etch__slot_gen[w->slot], __ATOMIC_SEQ_CST) !=
          w->sess->gen ||
      b->ops->packet_done || /* it takes each packet: no fast path */
      w->phantoms)           /* the slow path keeps the levels */
    __atomic_store_n(&w->fast_end, 0, __ATOMIC_RELAXED);
  /* Keep a reset in the newest part of a ring that wraps quickly. */
  if (b->reset_span &&
      b->ops->chunks_handed(b) - w->acq_at_reset >= b->reset_span)
    w->need_reset = true;
  return true;
}

static bool next_chunk(etch_writer *w) {
  retire_chunk(w);
  if (take_chunk(w, 0)) return true;
  if (!w->drops_unreported) w->sess->backend->ops->note_drop(w->sess->backend);
  w->drops_unreported = true;
  w->need_reset = true;
  return false;
}

/* ---- packets ----------------------------------------------------------------- */

static bool writer_grow(etch__pb_stream *s, size_t need) {
  etch_writer *w = (etch_writer *)s;
  if (!w->in_packet || !w->chunk) return false;
  /* The fragment being written is in the current chunk, its size first. */
  ETCH_DCHECK(w->frag_hdr >= w->payload &&
              w->frag_hdr + ETCH_PB_NESTED_LEN <= s->cur && s->cur <= s->end);
  if (need + ETCH_PB_NESTED_LEN > w->sess->backend->payload_size) return false;
  if (w->nheld == ETCH_MAX_HELD) return false;
  uint32_t frag_len = (uint32_t)(s->cur - (w->frag_hdr + ETCH_PB_NESTED_LEN));
  etch__pb_put_redundant4(w->frag_hdr, frag_len);
  etch_held *h = &w->held[w->nheld++];
  h->c = w->chunk;
  h->payload = w->payload;
  h->seg = s->seg;
  h->seg_off = s->seg_off;
  h->used = (uint32_t)(s->cur - w->payload);
  h->flags = w->chunk_flags | ETCH_CHUNK_LAST_CONTINUES;
  uint64_t next_off = s->seg_off + (uint64_t)(s->cur - s->seg);
  if (!take_chunk(w, ETCH_CHUNK_FIRST_CONTINUES)) {
    w->chunk = NULL; /* the held chunks are settled in packet_end */
    return false;
  }
  w->frag_hdr = w->payload;
  s->cur = w->payload + ETCH_PB_NESTED_LEN;
  s->seg = s->cur;
  s->seg_off = next_off;
  return need <= (size_t)(s->end - s->cur);
}

static uint8_t *writer_resolve(etch__pb_stream *s, uint64_t off) {
  etch_writer *w = (etch_writer *)s;
  for (uint32_t i = w->nheld; i-- > 0;) {
    etch_held *h = &w->held[i];
    if (off >= h->seg_off) return h->seg + (off - h->seg_off);
  }
  /* The stream resolves only offsets before its segment, which starts a
   * held chunk; the first held one starts the packet at offset 0. */
  (void)ETCH_NEVER(true);
  return NULL;
}

/* Tells a backend that takes every packet that one was published (held
 * chunks went back first, so it sees the packet's parts in order). */
static void packet_done(etch_writer *w) {
  etch_backend *b = w->sess->backend;
  if (ETCH_UNLIKELY(b->ops->packet_done != NULL)) b->ops->packet_done(b, w->chunk);
}

bool etch__packet_begin(etch_writer *w) {
  /* Packets do not nest: one ends before the next begins. */
  ETCH_DCHECK(!w->in_packet && w->nheld == 0);
  if (!w->chunk) return false;
  if ((size_t)(w->st.end - w->st.cur) < 64 && !next_chunk(w)) return false;
  w->pkt_start_used = (uint32_t)(w->st.cur - w->payload);
  w->frag_hdr = w->st.cur;
  w->st.cur += ETCH_PB_NESTED_LEN;
  w->st.seg = w->st.cur;
  w->st.seg_off = 0;
  w->st.failed = false;
  w->nheld = 0;
  w->in_packet = true;
  w->packet_failed = false;
  return true;
}

/* Gives up the packet in progress: no byte of it becomes visible. */
static void packet_abandon(etch_writer *w) {
  if (w->nheld > 0) {
    etch_held *first = &w->held[0];
    etch__chunk_publish(first->c, w->pkt_start_used,
                        first->flags & ~(uint32_t)ETCH_CHUNK_LAST_CONTINUES);
    give_back(w, first->c);
    for (uint32_t i = 1; i < w->nheld; i++) {
      etch__chunk_publish(w->held[i].c, 0, w->held[i].flags &
                                              ~(uint32_t)ETCH_CHUNK_LAST_CONTINUES);
      give_back(w, w->held[i].c);
    }
    if (w->chunk) {
      etch__chunk_publish(w->chunk, 0, 0);
      give_back(w, w->chunk);
    }
    set_no_chunk(w);
  } else if (w->chunk) {
    w->st.cur = w->payload + w->pkt_start_used;
  }
  w->nheld = 0;
  w->packet_failed = true;
  /* Interning done for the lost packet is void: start over, at the next
   * event (lim 0 sends it to the slow path, which resets). */
  w->need_reset = true;
  w->lim = 0;
  w->drops_unreported = true;
}

void etch__packet_end(etch_writer *w) {
  ETCH_DCHECK(w->in_packet && w->nheld <= ETCH_MAX_HELD);
  w->in_packet = false;
  if (w->st.failed || !w->chunk) {
    packet_abandon(w);
    return;
  }
  /* The last fragment: its size reserved in the current chunk, its bytes
   * after it, within the chunk; the chunks before it are held. */
  ETCH_DCHECK(w->frag_hdr >= w->payload &&
              w->frag_hdr + ETCH_PB_NESTED_LEN <= w->st.cur &&
              w->st.cur <= w->st.end);
  ETCH_DCHECK(w->nheld == 0 ||
              (w->chunk_flags & ETCH_CHUNK_FIRST_CONTINUES));
  uint32_t frag_len =
      (uint32_t)(w->st.cur - (w->frag_hdr + ETCH_PB_NESTED_LEN));
  etch__pb_put_redundant4(w->frag_hdr, frag_len);
  etch__chunk_publish(w->chunk, (uint32_t)(w->st.cur - w->payload),
                      w->chunk_flags);
  for (uint32_t i = 0; i < w->nheld; i++) {
    etch__chunk_publish(w->held[i].c, w->held[i].used, w->held[i].flags);
    give_back(w, w->held[i].c);
  }
  w->nheld = 0;
  packet_done(w);
}

bool etch__writer_put_packet(etch_writer *w, const uint8_t *data,
                             size_t len) {
  ETCH_DCHECK(!w->in_packet);
  if (!w->chunk) return false;
  size_t room = (size_t)(w->st.end - w->st.cur);
  if (ETCH_LIKELY(len + ETCH_PB_MAX_VARINT <= room)) {
    uint8_t *q = etch__pb_put_varint(w->st.cur, len);
    memcpy(q, data, len);
    w->st.cur = q + len;
    etch__chunk_publish(w->chunk, (uint32_t)(w->st.cur - w->payload),
                        w->chunk_flags);
    packet_done(w);
    return true;
  }
  if (!etch__packet_begin(w)) return false;
  etch__pb_write_bytes(&w->st, data, len);
  etch__packet_end(w);
  return !w->packet_failed;
}

/* ---- descriptors ------------------------------------------------------------- */

static void read_small_file(const char *path, char *out, size_t cap,
                            size_t *len) {
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n > 0) *len = (size_t)n;
  out[*len] = '\0';
}

static void process_name(char *out, size_t cap) {
  pthread_mutex_lock(&etch__g.lock);
  if (!etch__g.process_name_set) {
    size_t n;
    read_small_file("/proc/self/comm", etch__g.process_name,
                    sizeof etch__g.process_name, &n);
    while (n && etch__g.process_name[n - 1] == '\n')
      etch__g.process_name[--n] = '\0';
    etch__g.process_name_set = true;
  }
  snprintf(out, cap, "%s", etch__g.process_name);
  pthread_mutex_unlock(&etch__g.lock);
}

static void put_abs_ts(etch__pb_stream *s, uint64_t ns) {
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ns);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                             ETCH_CLOCK_BOOTTIME);
}

/* The command line, read once (every reset writes it): a process's
 * command line changes only with exec, which starts etch afresh. */
static void process_cmdline(char *out, size_t cap, size_t *len) {
  static char cached[1024];
  static size_t cached_len;
  static bool have;
  pthread_mutex_lock(&etch__g.lock);
  if (!have) {
    read_small_file("/proc/self/cmdline", cached, sizeof cached, &cached_len);
    have = true;
  }
  *len = cached_len < cap ? cached_len : cap;
  memcpy(out, cached, *len);
  pthread_mutex_unlock(&etch__g.lock);
}

static void write_process_descriptor(etch_writer *w, uint64_t ns) {
  char name[256];
  char cmdline[1024];
  size_t clen;
  process_name(name, sizeof name);
  process_cmdline(cmdline, sizeof cmdline, &clen);
  if (!etch__packet_begin(w)) return;
  put_abs_ts(&w->st, ns);
  etch__proto_process_track(&w->st, etch__process_uuid(), etch__g.pid,
                            cmdline, clen, name);
  etch__packet_end(w);
}

static void write_thread_descriptor(etch_writer *w, uint64_t ns) {
  if (!etch__packet_begin(w)) return;
  put_abs_ts(&w->st, ns);
  etch__proto_thread_track(&w->st, etch__thread_uuid(w->tid), etch__g.pid,
                           w->tid, w->thread_name, strlen(w->thread_name));
  etch__packet_end(w);
}

void etch__writer_ensure_track(etch_writer *w, const etch_track *t) {
  if (!t || t->kind == ETCH_TRACK_KIND_PROCESS) return;
  if (etch__bitset_has(&w->seen_tracks, t->id)) return;
  if (t->parent) etch__writer_ensure_track(w, t->parent);
  if (!etch__packet_begin(w)) return;
  etch__pb_stream *s = &w->st;
  put_abs_ts(s, etch__writer_last_ns(w));
  etch__pb_nested td;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
  etch__pb_write_varint_field(s, ETCH_TD_UUID, etch__track_uuid(t));
  etch__pb_write_varint_field(s, ETCH_TD_PARENT_UUID,
                             etch__track_uuid(t->parent));
  etch__pb_write_string_field(s, ETCH_TD_NAME, t->name);
  if (t->kind == ETCH_TRACK_KIND_COUNTER) {
    etch__pb_nested cd;
    etch__pb_nested_begin(s, ETCH_TD_COUNTER, &cd);
    if (t->unit) etch__pb_write_varint_field(s, ETCH_CD_UNIT, t->unit);
    if (t->unit_name)
      etch__pb_write_string_field(s, ETCH_CD_UNIT_NAME, t->unit_name);
    etch__pb_nested_end(s, &cd);
  }
  etch__pb_nested_end(s, &td);
  etch__packet_end(w);
  if (!w->packet_failed) etch__bitset_set(&w->seen_tracks, t->id);
}

uint64_t etch__rel_cap_max = UINT64_MAX;

/* The fast path's limit on ticks past the anchor: the reset deadline, the
 * anchor's expiry, and the largest count whose product with the multiplier
 * fits 64 bits. */
static void set_lim(etch_writer *w) {
  uint64_t mult = w->anchor.mult ? w->anchor.mult : 1;
  w->rel_cap = UINT64_MAX / mult;
  if (w->rel_cap > etch__rel_cap_max) w->rel_cap = etch__rel_cap_max;
  uint64_t until = w->reset_deadline < w->anchor_expiry ? w->reset_deadline
                                                        : w->anchor_expiry;
  uint64_t left = until > w->anchor.ns ? until - w->anchor.ns : 0;
  unsigned __int128 iticks = ((unsigned __int128)left << 32) / mult;
  w->lim = iticks < w->rel_cap ? (uint64_t)iticks : w->rel_cap;
}

/*
 * Takes a fresh anchor without a packet: the sequence's clock goes on from
 * its last event, so the anchor is put at that event on the line through
 * the fresh (ticks, BOOTTIME) reading. Taken when the old anchor expires
 * (its multiplier's error would grow past a few tens of ns) or when events
 * outgrow the fast path's product; events after it are converted from the
 * fresh reading. Should the old anchor have run ahead of BOOTTIME, the new
 * one is put where the last event was and events keep that time until
 * BOOTTIME catches up.
 */
static void writer_reanchor(etch_writer *w) {
  etch_clock_anchor a;
  etch__clock_anchor_now(&a);
  uint64_t last = etch__writer_last_ns(w);
  if (a.ns >= last) {
    uint64_t back =
        (uint64_t)(((unsigned __int128)(a.ns - last) << 32) / a.mult);
    /* After a long pause the next event can be beyond the product's
     * range from here: it takes the slow path, which converts it exactly,
     * and the anchor moves up to it at the event after. */
    a.ticks = back <= a.ticks ? a.ticks - back : 0;
    a.ns = last;
  } else {
    a.ticks += (uint64_t)(((unsigned __int128)(last - a.ns) << 32) / a.mult);
    a.ns = last;
  }
  uint64_t now_ns = a.ns > last ? a.ns : last;
  w->anchor = a;
  w->anchor_expiry = now_ns + etch__clock_anchor_span(&a);
  w->rel_ns = 0;
  set_lim(w);
}

/*
 * The events dropped since the last report, said on the writer's own
 * sequence now that it has chunks again (after the reset that follows every
 * loss): an instant etch.dropped_events on its thread track at the first
 * drop's time, args count and last_drop_ns. A service's writer has nowhere
 * else to say it. Under the session's lock, so that a read of the session
 * (which holds it from reading the buffer until it has reported what is
 * still unreported) counts every drop once; taken only if free: while a
 * read runs, the report waits for the next reset.
 */
static void report_drops(etch_writer *w) {
  if (w->dropped == w->reported || w->packet_failed) return;
  if (pthread_mutex_trylock(&w->sess->lock) != 0) return;
  uint64_t count = w->dropped - w->reported;
  uint64_t first = w->first_drop_ns;
  uint64_t last = w->last_drop_ns < first ? first : w->last_drop_ns;
  if (etch__packet_begin(w)) {
    etch__pb_stream *s = &w->st;
    put_abs_ts(s, first);
    etch_note_arg args[2] = {
        {.name = "count", .value = count},
        {.name = "last_drop_ns", .value = last, .is_uint = true}};
    etch__put_etch_instant(s, "etch.dropped_events", 0, args, 2);
    etch__packet_end(w);
    if (!w->packet_failed)
      __atomic_store_n(&w->reported, w->reported + count, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&w->sess->lock);
}

void (*etch__writer_reset_hook)(void);

static bool reset_packets(etch_writer *w, uint64_t ns);
static void write_pending_ends(etch_writer *w);

/* Starts the writer's state over (clock anchor, interning) for an event at
 * `ticks`; touches nothing but the writer. The anchor's time. */
static uint64_t reset_state(etch_writer *w, uint64_t ticks) {
  etch_clock_anchor a;
  etch__clock_anchor_now(&a);
  if (ticks < a.ticks) {
    /* Anchor at the event that triggered the reset, so it keeps its time. */
    uint64_t back =
        (uint64_t)(((unsigned __int128)(a.ticks - ticks) * a.mult) >> 32);
    a.ns -= back;
    a.ticks = ticks;
  }
  /* Never behind the sequence's last event: the fresh BOOTTIME reading can
   * trail the old anchor's extrapolation by the multiplier's error. */
  uint64_t last = etch__writer_last_ns(w);
  if (a.ns < last) a.ns = last;
  w->anchor = a;
  /* Finite even with periodic resets off: a tick reading from before the
   * anchor then shows up as a far-future time and takes the slow path. */
  uint64_t interval = w->sess->reset_interval_ns ? w->sess->reset_interval_ns
                                                  : (1ull << 60);
  w->reset_deadline = a.ns + interval;
  w->anchor_expiry = a.ns + etch__clock_anchor_span(&a);
  w->rel_ns = 0;
  set_lim(w);
  memset(w->seen_fast, 0, sizeof w->seen_fast);
  etch__bitset_clear(&w->seen_names_more);
  etch__bitset_clear(&w->seen_cats);
  etch__bitset_clear(&w->seen_tracks);
  etch__bitset_clear(&w->seen_stacks);
  etch__bitset_clear(&w->seen_frames);
  etch__bitset_clear(&w->seen_maps);
  etch__strtab_clear(&w->da_names);
  etch__strtab_clear(&w->dyn_names);
  w->reset_gen++;
  w->need_reset = false;
  w->acq_at_reset = w->sess->backend->ops->chunks_handed(w->sess->backend);
  w->names_gen = __atomic_load_n(&etch__g.names_gen, __ATOMIC_RELAXED);
  return a.ns;
}

void etch__writer_reset(etch_writer *w, uint64_t ticks) {
  uint64_t ns = reset_state(w, ticks);
  if (etch__tls.thread_name_set &&
      strncmp(w->thread_name, etch__tls.thread_name, sizeof w->thread_name)) {
    /* The drop report reads the name under the session's lock. */
    pthread_mutex_lock(&w->sess->lock);
    copy_name(w->thread_name, etch__tls.thread_name);
    pthread_mutex_unlock(&w->sess->lock);
  }
  if (!reset_packets(w, ns)) return;
  uint32_t n = __atomic_load_n(&nhooks, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (hooks[i]->after_reset) hooks[i]->after_reset(w);
  void (*hook)(void) = __atomic_load_n(&etch__writer_reset_hook, __ATOMIC_ACQUIRE);
  if (hook) hook();
}

/*
 * The packets that start a sequence over at `ns` (the anchor's time): the
 * cleared incremental state with its defaults and clock snapshot, the
 * process and thread descriptors, the report of unreported drops. Touches
 * nothing but the writer. False when the first packet could not be written.
 */
static bool reset_packets(etch_writer *w, uint64_t ns) {
  etch_clock_anchor a = w->anchor;
  a.ns = ns;
  /* Slice ends kept across dropped events go first, in the state they
   * belong to: after the reset, a ring that wrapped could leave them the
   * only packets of the sequence it kept, undecodable. */
  if (w->npend && w->started) write_pending_ends(w);
  if (!etch__packet_begin(w)) return false;
  etch__pb_stream *s = &w->st;
  put_abs_ts(s, a.ns);
  etch__pb_write_varint_field(s, ETCH_PKT_SEQUENCE_FLAGS,
                             ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  if (w->drops_unreported)
    etch__pb_write_varint_field(s, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  if (!w->started) /* readers tell "starts here" from "earlier data lost" */
    etch__pb_write_varint_field(s, ETCH_PKT_FIRST_PACKET_ON_SEQUENCE, 1);
  etch__pb_nested d, ted, cs, c;
  etch__pb_nested_begin(s, ETCH_PKT_TRACE_PACKET_DEFAULTS, &d);
  etch__pb_write_varint_field(s, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID,
                             ETCH_CLOCK_INCREMENTAL);
  etch__pb_nested_begin(s, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS, &ted);
  etch__pb_write_varint_field(s, ETCH_TEDEFAULTS_TRACK_UUID,
                             etch__thread_uuid(w->tid));
  etch__pb_nested_end(s, &ted);
  etch__pb_nested_end(s, &d);
  etch__pb_nested_begin(s, ETCH_PKT_CLOCK_SNAPSHOT, &cs);
  etch__pb_nested_begin(s, ETCH_CLOCKSNAP_CLOCKS, &c);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_TIMESTAMP, a.ns);
  etch__pb_nested_end(s, &c);
  etch__pb_nested_begin(s, ETCH_CLOCKSNAP_CLOCKS, &c);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_INCREMENTAL);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_TIMESTAMP, a.ns);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_IS_INCREMENTAL, 1);
  etch__pb_nested_end(s, &c);
  etch__pb_nested_end(s, &cs);
  etch__packet_end(w);
  if (w->packet_failed) return false;
  w->started = true;
  w->drops_unreported = false;
  write_process_descriptor(w, a.ns);
  write_thread_descriptor(w, a.ns);
  report_drops(w);
  if (w->npend) write_pending_ends(w); /* those the first packet lacked room for */
  return true;
}

/* ---- lifecycle ---------------------------------------------------------------- */

static etch_writer *writer_create(uint32_t slot, uint32_t gen) {
  etch_tls *t = &etch__tls;
  pthread_once(&tls_key_once, tls_key_create);
  if (!t->dtor_registered) {
    pthread_setspecific(tls_key, t);
    t->dtor_registered = true;
  }
  /* Cache-line aligned: two threads' writers never share a line. */
  void *mem = NULL;
  if (posix_memalign(&mem, 64, sizeof(etch_writer)) != 0) return NULL;
  etch_writer *w = (etch_writer *)mem;
  memset(w, 0, sizeof *w);
  pthread_mutex_lock(&etch__g.lock);
  etch_session *s = etch__g.slots[slot];
  if (!s || s->gen != gen ||
      __atomic_load_n(&s->state, __ATOMIC_RELAXED) != ETCH_SESS_RUNNING) {
    pthread_mutex_unlock(&etch__g.lock);
    free(w);
    return NULL;
  }
  w->seq_id = ++etch__g.next_seq_id;
  /* Set before the writer is on the session's list, where the drop
   * report can see it. */
  w->tid = etch__gettid();
  if (t->thread_name_set)
    copy_name(w->thread_name, t->thread_name);
  else
    pthread_getname_np(pthread_self(), w->thread_name, sizeof w->thread_name);
  pthread_mutex_lock(&s->lock);
  s->refs++;
  w->next = s->writers;
  s->writers = w;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_unlock(&etch__g.lock);

  w->sess = s;
  w->slot = slot;
  w->st.grow = writer_grow;
  w->st.resolve = writer_resolve;
  w->need_reset = true;
  t->w[slot] = w;
  t->gen[slot] = gen;
  return w;
}

/*
 * Reports the drops of a writer no thread writes with any more (its thread
 * exited, or it was replaced) on its own sequence: a chunk, the sequence
 * started over (nothing of the thread's state is needed), the report, the
 * chunk completed. False when there is still something to report (no chunk
 * to be had: asked again later, see etch__session_report_orphans).
 */
static bool report_orphan(etch_writer *w) {
  if (w->dropped == w->reported) return true;
  if (!w->chunk && !take_chunk(w, 0)) return false;
  reset_packets(w, reset_state(w, etch__ticks()));
  w->need_reset = true; /* should it write again */
  retire_chunk(w);
  return w->dropped == w->reported;
}

bool etch__session_report_orphans(etch_session *s) {
  etch_writer *todo[64];
  size_t n = 0;
  bool all = true;
  pthread_mutex_lock(&s->lock);
  for (etch_writer *w = s->writers; w; w = w->next)
    if (__atomic_load_n(&w->detached, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&w->dropped, __ATOMIC_RELAXED) != w->reported) {
      if (n < ETCH_ARRAY_SIZE(todo)) todo[n++] = w;
      else all = false;
    }
  pthread_mutex_unlock(&s->lock);
  for (size_t i = 0; i < n; i++) all &= report_orphan(todo[i]);
  return all;
}

bool etch__tls_report_drops(void) {
  bool all = true;
  for (uint32_t slot = 0; slot < ETCH_MAX_SESSIONS; slot++) {
    etch_writer *w = etch__tls_writer(slot);
    if (!w || __atomic_load_n(&w->dropped, __ATOMIC_RELAXED) == w->reported)
      continue;
    if (__atomic_load_n(&etch__slot_gen[slot], __ATOMIC_ACQUIRE) !=
        etch__tls.gen[slot])
      continue; /* a session gone: it reported what it could */
    all &= report_orphan(w);
  }
  return all;
}

void etch__writer_detach(etch_writer *w) {
  etch_session *s = w->sess;
  retire_chunk(w);
  /* Drops not reported yet: now if there is a chunk, else later. */
  report_orphan(w);
  __atomic_store_n(&w->detached, true, __ATOMIC_RELEASE);
  if (s->backend->ops->writer_done)
    s->backend->ops->writer_done(s->backend, w->seq_id);
  etch__session_release(s);
}

void etch__writer_free(etch_writer *w) {
  etch__bitset_free(&w->seen_names_more);
  etch__bitset_free(&w->seen_cats);
  etch__bitset_free(&w->seen_tracks);
  etch__bitset_free(&w->seen_stacks);
  etch__bitset_free(&w->seen_frames);
  etch__bitset_free(&w->seen_maps);
  etch__strtab_clear(&w->da_names);
  etch__strtab_clear(&w->dyn_names);
  free(w->scratch.data);
  free(w);
}

/*
 * The drop counters are read by whoever serialises the session, from
 * another thread, so they are stored atomically (relaxed: each is one
 * value; the report reads the count first and the times after it). A
 * writer that never had a chunk has no anchor yet (mult 0): its drop
 * times then come from BOOTTIME directly.
 */
/* A writer that found no chunk asks again after this long: until then
 * its events are dropped at once (a backend with no chunk to give, a full
 * shared memory, a full discard buffer, is asked once per interval, not
 * once per event). */
#define DROP_RETRY_NS 10000u

static uint64_t drop_time(const etch_writer *w, uint64_t ticks) {
  return w->anchor.mult ? etch__ticks_to_ns(&w->anchor, ticks)
                        : etch__clock_ticks_to_boottime(ticks);
}

/* The fast path again once no phantom level is open (as take_chunk). */
static void fast_again(etch_writer *w) {
  if (!w->chunk || w->phantoms || w->sess->backend->ops->packet_done ||
      __atomic_load_n(&etch__slot_gen[w->slot], __ATOMIC_SEQ_CST) !=
          w->sess->gen)
    return;
  __atomic_store_n(&w->fast_end, (uintptr_t)w->st.end - ETCH_FAST_MAX,
                   __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&etch__slot_gen[w->slot], __ATOMIC_SEQ_CST) !=
      w->sess->gen)
    __atomic_store_n(&w->fast_end, 0, __ATOMIC_RELAXED);
}

bool etch__writer_end_is_phantom(etch_writer *w) {
  if (!w->phantoms || !w->open_n) return false;
  if (w->open_bits & (1ull << (w->open_n - 1))) return false;
  w->open_n--;
  if (--w->phantoms == 0) fast_again(w);
  return true;
}

void etch__writer_level_written(etch_writer *w, int delta) {
  /* At most 64 levels kept apart, the phantoms among them. */
  ETCH_DCHECK(w->open_n <= 64 && (!w->phantoms || w->phantoms <= w->open_n));
  if (delta > 0) {
    w->depth++;
    if (w->phantoms && w->open_n < 64) w->open_bits |= 1ull << w->open_n++;
  } else if (w->depth) {
    w->depth--;
    if (w->phantoms && w->open_n) w->open_n--;
  }
}

/* A slice begin on the thread track was lost: its level is a phantom. */
static void drop_begin(etch_writer *w) {
  if (!w->phantoms) {
    if (w->depth >= 64) return; /* too deep to keep apart: as before */
    w->open_n = w->depth;
    w->open_bits = w->depth ? ~0ull >> (64 - w->depth) : 0;
  }
  if (w->open_n >= 64) return;
  w->open_bits &= ~(1ull << w->open_n);
  w->open_n++;
  w->phantoms++;
  __atomic_store_n(&w->fast_end, 0, __ATOMIC_RELAXED);
}

/* A slice end on the thread track could not be written at `ns`: true
 * when it is kept, to be written later (then it is not lost). */
static bool drop_end(etch_writer *w, uint64_t ns) {
  if (etch__writer_end_is_phantom(w)) return false; /* its begin was lost */
  if (!w->depth) return false;                 /* no begin of it recorded */
  etch__writer_level_written(w, -1); /* closed: by the kept end, or lost */
  if (w->npend == ETCH_MAX_PENDING_ENDS) return false;
  w->pend_ns[w->npend++] = ns;
  w->need_reset = true; /* which writes it */
  return true;
}

void etch__pending_end_fields(etch__pb_stream *s, uint64_t ns,
                              uint64_t track_uuid) {
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ns);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                             ETCH_CLOCK_BOOTTIME);
  /* On the writer's own sequence: on its default track (a service that
   * lost the slice's begin then leaves the end out, counted); elsewhere
   * on the thread's track. */
  if (!track_uuid)
    etch__pb_write_varint_field(s, ETCH_PKT_SEQUENCE_FLAGS,
                               ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  etch__pb_nested te;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_EVENT, &te);
  etch__pb_write_varint_field(s, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
  if (track_uuid)
    etch__pb_write_varint_field(s, ETCH_TE_TRACK_UUID, track_uuid);
  etch__pb_nested_end(s, &te);
}

/* The kept ends on the writer's own sequence, innermost first (in the
 * order they were dropped). */
static void write_pending_ends(etch_writer *w) {
  uint32_t done = 0;
  for (; done < w->npend; done++) {
    if (!etch__packet_begin(w)) break;
    etch__pending_end_fields(&w->st, w->pend_ns[done], 0);
    etch__packet_end(w);
    if (w->packet_failed) break;
  }
  memmove(w->pend_ns, w->pend_ns + done, (w->npend - done) * sizeof w->pend_ns[0]);
  w->npend -= done;
}

static void count_drop(etch_writer *w, uint64_t ns);

static void drop_at(etch_writer *w, uint64_t ns) {
  uint8_t kind = etch__tls.drop_kind;
  if (ETCH_UNLIKELY(kind)) {
    if (kind == ETCH_DROP_BEGIN) drop_begin(w);
    else if (drop_end(w, ns)) return; /* kept: written later, not lost */
  }
  count_drop(w, ns);
}

void etch__writer_drop_unwritten(etch_writer *w, uint64_t ticks) {
  count_drop(w, drop_time(w, ticks));
}

static void count_drop(etch_writer *w, uint64_t ns) {
  /* Dropped for want of a chunk just asked for: not again for a while. */
  if (!w->chunk && ns >= w->retry_ns) w->retry_ns = ns + DROP_RETRY_NS;
  if (w->dropped == w->reported) /* the first since the last report */
    __atomic_store_n(&w->first_drop_ns, ns, __ATOMIC_RELAXED);
  __atomic_store_n(&w->last_drop_ns, ns, __ATOMIC_RELAXED);
  __atomic_store_n(&w->dropped, w->dropped + 1, __ATOMIC_RELEASE);
  w->drops_unreported = true;
  /* The sequence starts over at the next event, whose writer check must
   * not pass it by: a drop for want of memory leaves the chunk room and
   * time, and what was interned for the dropped event is void. */
  w->need_reset = true;
  w->lim = 0;
}

void etch__writer_drop(etch_writer *w, uint64_t ticks) {
  drop_at(w, drop_time(w, ticks));
}

static etch_writer *prepare(uint32_t slot, uint64_t ticks, bool explicit_ts);

etch_writer *etch__writer_prepare(uint32_t slot, uint64_t ticks) {
  return prepare(slot, ticks, false);
}

etch_writer *etch__writer_prepare_explicit(uint32_t slot, uint64_t ticks) {
  return prepare(slot, ticks, true);
}

static etch_writer *prepare(uint32_t slot, uint64_t ticks, bool explicit_ts) {
  etch_tls *t = &etch__tls;
  uint32_t gen = __atomic_load_n(&etch__slot_gen[slot], __ATOMIC_RELAXED);
  etch_writer *w = etch__tls_writer(slot);
  if (w && t->gen[slot] != gen) {
    etch__tls_forget(slot);
    etch__writer_detach(w);
    w = NULL;
  }
  if (!w) {
    w = writer_create(slot, gen);
    if (!w) return NULL;
  }
  if (__atomic_load_n(&w->sess->state, __ATOMIC_RELAXED) != ETCH_SESS_RUNNING)
    return NULL;
  if (w->in_packet) return NULL; /* re-entered from inside a packet */
  /* An event from inside an interceptor's callback: not intercepted (it
   * would reach the callback again, or its chunk in the middle of a read). */
  if (ETCH_UNLIKELY(t->in_intercept) && w->sess->backend->ops->packet_done)
    return NULL;
  if (ETCH_UNLIKELY(!w->chunk) && w->retry_ns) {
    uint64_t ns = drop_time(w, ticks);
    if (ns < w->retry_ns) {
      drop_at(w, ns);
      return NULL;
    }
  }
  if ((!w->chunk || (size_t)(w->st.end - w->st.cur) < ETCH_FAST_MAX) &&
      !next_chunk(w)) {
    etch__writer_drop(w, ticks);
    return NULL;
  }
  uint64_t ns = etch__ticks_to_ns(&w->anchor, ticks);
  if (w->need_reset || ns >= w->reset_deadline ||
      w->names_gen != __atomic_load_n(&etch__g.names_gen, __ATOMIC_RELAXED)) {
    etch__writer_reset(w, ticks);
    if (w->packet_failed || !w->chunk) {
      etch__writer_drop(w, ticks);
      return NULL;
    }
  } else if (!explicit_ts && ticks - w->anchor.ticks >= w->lim) {
    /* Expired, beyond the product's range, behind the anchor (a TSC that
     * jumped back) or from clock_gettime (the TSC was given up). */
    writer_reanchor(w);
  }
  if ((size_t)(w->st.end - w->st.cur) < ETCH_FAST_MAX && !next_chunk(w)) {
    etch__writer_drop(w, ticks);
    return NULL;
  }
  return w;
}
