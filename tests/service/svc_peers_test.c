/*
 * svc_peers_test.c - etchd end to end: peers written by hand on the IPC, as
 * Perfetto's own behave, and producers that misbehave: commits outside the
 * shared memory, packets that speak for the service or for another process,
 * scraping, clearing incremental state, the consumer port's refusals.
 */
#define _GNU_SOURCE
#include "svc_test.h"

/* A producer that asks the service to move a chunk outside its shared
 * memory is disconnected with the reason. */
TEST(a_commit_outside_the_shared_memory_is_refused) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.prod, "ProducerPort");
  raw_invoke(&r, "InitializeConnection", NULL);
  /* chunks_to_move { page: 1000000 chunk: 3 target_buffer: 1 } */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, 1000000);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 3);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  etch__pb_nested_end(&b.s, &m);
  raw_invoke(&r, "CommitData", &b);
  etch__pb_buf_free(&b);
  etch_ipc_frame g;
  for (int i = 0; i < 100 && !r.c.failed; i++) {
    etch__ipc_conn_wait(&r.c, 100);
    while (etch__ipc_conn_next(&r.c, &g) == 1) {
    }
  }
  ASSERT_TRUE(r.c.failed);
  raw_close(&r);
  wait_log(&s, "outside the shared memory (page 1000000, chunk 3)", 1);
  ASSERT_EQ_INT(
      log_lines(&s, "outside the shared memory (page 1000000, chunk 3)"), 1);
  svc_stop(&s);
}

/* A consumer that leaves frees its session; --list shows the state. */
TEST(a_consumer_that_leaves_frees_its_session) {
  svc s;
  svc_start(&s);
  char out[700], list[700];
  snprintf(out, sizeof out, "%s/gone.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t p = producer("lister", 1, 0);
  wait_log(&s, "(lister), instance", 1); /* in the session */
  snprintf(list, sizeof list, "%s/list.txt", s.dir);
  char *argv[] = {(char *)ETCH_BIN, "record", "--list", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, list)), 0);
  size_t n;
  char *text = (char *)etch_test_read_file(list, &n);
  ASSERT_TRUE(text != NULL);
  char want[64];
  snprintf(want, sizeof want, "lister  pid %d", (int)p);
  if (!memmem(text, n, want, strlen(want))) FAIL("--list says:\n%.*s", (int)n, text);
  ASSERT_TRUE(memmem(text, n, "track_event (producer", 21) != NULL);
  ASSERT_TRUE(memmem(text, n, ": svc", 5) != NULL);
  ASSERT_TRUE(memmem(text, n, "sessions: 1", 11) != NULL);
  free(text);
  kill(rec, SIGKILL); /* no goodbye */
  wait_exit(rec);
  wait_log(&s, ": freed", 1);
  unlink(list);
  ASSERT_EQ_INT(wait_exit(spawn(argv, list)), 0);
  text = (char *)etch_test_read_file(list, &n);
  ASSERT_TRUE(memmem(text, n, "sessions: 0", 11) != NULL);
  free(text);
  kill(p, SIGKILL);
  wait_exit(p);
  svc_stop(&s);
}

/* A config with an option etch does not run is refused by name. */
TEST(record_refuses_a_config_it_would_not_honour) {
  svc s;
  svc_start(&s);
  char cfg[700], log[700];
  snprintf(cfg, sizeof cfg, "%s/c.pbtx", s.dir);
  snprintf(log, sizeof log, "%s/refuse.log", s.dir);
  FILE *f = fopen(cfg, "w");
  fputs("buffers { size_kb: 1024 }\ntrigger_config { trigger_timeout_ms: 1 }\n", f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o",
                  "/dev/null", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, log)), 1);
  size_t n;
  char *text = (char *)etch_test_read_file(log, &n);
  ASSERT_TRUE(text && memmem(text, n, "line 2: option 'trigger_config' of "
                                      "TraceConfig is not supported", 59));
  free(text);
  svc_stop(&s);
}

/* A producer that never commits its last chunk and never answers the
 * flush (Perfetto's track_event leaves the last chunk to the service): the
 * flush ends at its timeout, and the service copies that chunk's whole
 * packets out of the shared memory itself. */
/* A producer written by hand: InitializeConnection (with smb_scraping_mode
 * `scraping`, 0 unset), GetAsyncCommand, RegisterDataSource "raw.source"
 * (handles_incremental_state_clear when `clears`), then reads commands
 * until StartDataSource, mapping the shared memory on the way. Its
 * instance id in *inst. */
static void raw_started(const svc *s, raw *r, uint32_t scraping, bool clears,
                        uint8_t **smb_out, uint32_t *page_kb_out,
                        uint64_t *inst) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, "raw");
  if (scraping)
    etch__pb_write_varint_field(&b.s, ETCH_ICR_SMB_SCRAPING_MODE, scraping);
  raw_invoke(r, "InitializeConnection", &b);
  raw_invoke(r, "GetAsyncCommand", NULL);
  etch__pb_buf_reset(&b);
  etch__pb_nested d;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, "raw.source");
  if (clears)
    etch__pb_write_varint_field(&b.s, ETCH_DSD_HANDLES_INCREMENTAL_STATE_CLEAR,
                               1);
  etch__pb_nested_end(&b.s, &d);
  raw_invoke(r, "RegisterDataSource", &b);
  etch__pb_buf_free(&b);
  /* Until StartDataSource, taking the shared memory on the way. */
  uint8_t *smb = NULL;
  uint32_t page_kb = 0;
  bool started = false;
  for (int i = 0; i < 20 && !started; i++) {
    etch_ipc_frame g;
    raw_next(r, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id == ETCH_GAC_SETUP_TRACING) {
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB) page_kb = (uint32_t)sf.u;
        int fd = etch__ipc_conn_take_fd(&r->c);
        ASSERT_TRUE(fd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(fd, &st) == 0);
        smb = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
        ASSERT_TRUE(smb != MAP_FAILED);
        close(fd);
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE) {
        started = true;
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_DS_INSTANCE_ID) *inst = sf.u;
      }
    }
  }
  ASSERT_TRUE(started && smb && page_kb);
  *smb_out = smb;
  *page_kb_out = page_kb;
}

/* Leaves 5 packets (the last maybe half written) in an uncommitted chunk of
 * a producer that does (or asked not to have it done) get scraped; returns
 * the testing packets the trace holds and the largest n among them. */
static int leave_uncommitted(uint32_t scraping, int *max_n) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "scraped",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, scraping, false, &smb, &page_kb, &inst);
  /* Writer 1 registers its buffer, as Perfetto's SDK does... */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  /* ... and leaves 5 packets in its first chunk, the last one maybe half
   * written, uncommitted. */
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int n = count_testing(out, max_n);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
  return n;
}

/* Leaves 6 packets "pkt-0".."pkt-5" in an uncommitted chunk of writer 1,
 * of which pkt-1 also sets trusted_pid (79) and trusted_uid (3), pkt-3 has
 * a length past its end, pkt-4 carries a compressed_packets field: a
 * producer speaking for the service, or writing garbage. */
static void raw_write_hostile_chunk(uint8_t *smb, uint32_t page_size) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, 0)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 0, 1, 0, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < 6; i++) {
    uint8_t body[64];
    uint32_t bl = 0;
    int tl = snprintf((char *)body + 3, 16, "pkt-%d", i);
    body[0] = 0xa2; /* for_testing (900), LEN */
    body[1] = 0x38;
    body[2] = (uint8_t)tl;
    bl = 3 + (uint32_t)tl;
    if (i == 1) {
      const uint8_t trusted[] = {0xf8, 0x04, 0x07, 0x18, 0x05}; /* 79: 7, 3: 5 */
      memcpy(body + bl, trusted, sizeof trusted);
      bl += sizeof trusted;
    } else if (i == 3) {
      body[bl++] = 0x0a; /* field 1, LEN ... */
      body[bl++] = 0x7f; /* ... of 127 bytes that are not there */
    } else if (i == 4) {
      const uint8_t comp[] = {0x92, 0x03, 0x01, 0x00}; /* 50: 1 byte */
      memcpy(body + bl, comp, sizeof comp);
      bl += sizeof comp;
    }
    etch__pb_put_redundant4(p, bl);
    p += 4;
    memcpy(p, body, bl);
    p += bl;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)6, __ATOMIC_RELEASE);
}

/* TraceStats.invalid_packets in a trace file (-1: none). */
static long trace_invalid_packets(const char *path) {
  size_t n;
  uint8_t *d = etch_test_read_file(path, &n);
  if (!d) return -2;
  long v = -1;
  etch__pb_dec dec, pk, ts;
  etch__pb_field f, g, h;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    etch__pb_dec_init(&pk, f.data, f.len);
    while (etch__pb_next(&pk, &g)) {
      if (g.id != ETCH_PKT_TRACE_STATS || g.wt != 2) continue;
      etch__pb_dec_init(&ts, g.data, g.len);
      while (etch__pb_next(&ts, &h))
        if (h.id == ETCH_TS_INVALID_PACKETS && h.wt == 0) v = (long)h.u;
    }
  }
  free(d);
  return v;
}

/* A producer's packets that set fields only the service writes, or do not
 * decode, are left out of the trace and counted (TraceStats
 * invalid_packets); its other packets are kept. */
TEST(a_producers_packets_cannot_speak_for_the_service) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "hostile",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, false, &smb, &page_kb, &inst);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  raw_write_hostile_chunk(smb, page_kb * 1024);
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  /* Scraped: the first 5 (the 6th may be half written); of them pkt-0 and
   * pkt-2 are sound. */
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 2);
  ASSERT_EQ_INT(max_n, 2);
  ASSERT_EQ_INT((int)trace_invalid_packets(out), 3);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
}

/* A chunk of six packets, each "pkt-i" for testing: 0 with a process
 * descriptor naming `pid` (the producer's), 1 one naming pid 1, 2 a thread
 * descriptor of pid 1, 3 a thread descriptor of `pid`, 4 nothing more. */
static void raw_write_descriptor_chunk(uint8_t *smb, uint32_t page_size,
                                       int32_t pid) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, 0)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 0, 1, 0, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < 6; i++) {
    etch__pb_buf b;
    etch__pb_buf_init(&b, 64, 0);
    char tag[16];
    snprintf(tag, sizeof tag, "pkt-%d", i);
    etch__pb_write_bytes_field(&b.s, 900, tag, strlen(tag));
    if (i < 4) {
      etch__pb_nested td, d;
      etch__pb_nested_begin(&b.s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
      etch__pb_write_varint_field(&b.s, ETCH_TD_UUID, 77 + (uint64_t)i);
      etch__pb_nested_begin(&b.s, i < 2 ? ETCH_TD_PROCESS : ETCH_TD_THREAD, &d);
      etch__pb_write_varint_field(&b.s, 1,
                                  (uint64_t)(i == 0 || i == 3 ? pid : 1));
      if (i >= 2) etch__pb_write_varint_field(&b.s, 2, 1234);
      etch__pb_nested_end(&b.s, &d);
      etch__pb_nested_end(&b.s, &td);
    }
    uint32_t bl = (uint32_t)etch__pb_buf_len(&b);
    etch__pb_put_redundant4(p, bl);
    p += 4;
    memcpy(p, etch__pb_buf_data(&b), bl);
    p += bl;
    etch__pb_buf_free(&b);
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)6, __ATOMIC_RELEASE);
}

/* A producer's process and thread descriptors that claim another pid than
 * its own (etchd knows it: SO_PEERCRED) are left out and counted as
 * invalid packets, in etch and in trace_processor: it cannot put its
 * events under another process. Its honest ones stay. */
TEST(a_producer_cannot_pass_for_another_process) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "liar",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, false, &smb, &page_kb, &inst);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  raw_write_descriptor_chunk(smb, page_kb * 1024, (int32_t)getpid());
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  /* Scraped: the first 5 (the 6th may be half written); of them pkt-1
   * and pkt-2 lie. */
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 3);
  ASSERT_EQ_INT(max_n, 4);
  ASSERT_EQ_INT((int)trace_invalid_packets(out), 2);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
}

/* A producer that completed a chunk (5 packets) but went away before it
 * asked the service to move it (killed, say): the service takes the chunk
 * before it lets the shared memory go, every packet of it. */
TEST(a_producer_that_leaves_keeps_its_completed_chunks) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "left",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, ETCH_ICR_SMB_SCRAPING_DISABLED, false, &smb, &page_kb,
              &inst);
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_kb * 1024 * 4,
                           page_kb * 1024));
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 0));
  raw_close(&r); /* gone, the chunk never committed */
  /* Wait for the service's log to say it saw it go (bounded at 60 s,
   * only so that a broken service fails instead of hanging). */
  for (int i = 0; i < 6000 && !log_lines(&s, "(raw, pid"); i++) sleep_ms(10);
  ASSERT_EQ_INT(log_lines(&s, "(raw, pid"), 1);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 5);
  ASSERT_EQ_INT(max_n, 4);
  svc_stop(&s);
}

TEST(the_service_scrapes_what_a_silent_producer_left) {
  int max_n;
  ASSERT_EQ_INT(leave_uncommitted(0, &max_n), 4);
  ASSERT_EQ_INT(max_n, 3);
}

/* smb_scraping_mode DISABLED (what libetch's producers ask: their chunks
 * being written hold nothing in the shared memory): not scraped. */
TEST(a_producer_that_asks_not_to_be_scraped_is_not) {
  int max_n = -1;
  ASSERT_EQ_INT(leave_uncommitted(ETCH_ICR_SMB_SCRAPING_DISABLED, &max_n), 0);
}

/* incremental_state_config { clear_period_ms }: the service sends
 * ClearIncrementalState naming the instance to a producer whose data
 * source handles it, again and again. */
TEST(clear_period_ms_sends_clear_incremental_state) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "cleared",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "incremental_state_config { clear_period_ms: 20 }\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, true, &smb, &page_kb, &inst);
  ASSERT_TRUE(inst != 0);
  int clears = 0;
  /* raw_next waits up to 10 s a frame: two clears must come. */
  for (int i = 0; i < 20 && clears < 2; i++) {
    etch_ipc_frame g;
    raw_next(&r, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id != ETCH_GAC_CLEAR_INCREMENTAL_STATE) continue;
      etch__pb_dec sd;
      etch__pb_field sf;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      uint64_t id = 0;
      while (etch__pb_next(&sd, &sf))
        if (sf.id == ETCH_GAC_CLEAR_DATA_SOURCE_IDS) id = sf.u;
      ASSERT_EQ_U64(id, inst);
      clears++;
    }
  }
  ASSERT_EQ_INT(clears, 2);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  raw_close(&r);
  svc_stop(&s);
}

/* QueryCapabilities answers as a service that knows the call (a consumer
 * that finds no capabilities takes the service for an old one); methods
 * etch does not run answer success: false, said rather than ignored. */
TEST(consumer_port_capabilities_and_refusals) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.cons, "ConsumerPort");
  raw_invoke(&r, "QueryCapabilities", NULL);
  etch_ipc_frame g;
  raw_next(&r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(g.success);
  /* capabilities { has_query_capabilities: true } */
  static const uint8_t want[] = {0x0a, 0x82, 0x80, 0x80, 0x00, 0x08, 0x01};
  ASSERT_EQ_INT((int)g.body.len, (int)sizeof want);
  ASSERT_TRUE(memcmp(g.body.data, want, sizeof want) == 0);
  raw_invoke(&r, "ObserveEvents", NULL);
  raw_next(&r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_FALSE(g.success);
  /* GetTraceStats: refused without a session; with one, its buffers. */
  raw_invoke(&r, "GetTraceStats", NULL);
  raw_next(&r, &g);
  ASSERT_FALSE(g.success);
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 128, 0);
  etch__pb_buf_init(&args, 128, 0);
  const char *text = "buffers { size_kb: 1024 } buffers { size_kb: 64 }";
  ASSERT_OK(etch__trace_config_text_to_binary(text, strlen(text), &cfg));
  etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                            etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  raw_invoke(&r, "EnableTracing", &args);
  raw_invoke(&r, "GetTraceStats", NULL);
  raw_next(&r, &g);
  ASSERT_TRUE(g.success);
  /* trace_stats { buffer_stats { buffer_size ... } x2, tracing_sessions 1 } */
  etch__pb_dec d, ts, bs;
  etch__pb_field fl, h, k;
  uint64_t sizes[2] = {0, 0}, sessions = 0;
  int nb = 0;
  etch__pb_dec_init(&d, g.body.data, g.body.len);
  while (etch__pb_next(&d, &fl)) {
    ASSERT_EQ_INT((int)fl.id, 1);
    etch__pb_dec_init(&ts, fl.data, fl.len);
    while (etch__pb_next(&ts, &h)) {
      if (h.id == 6) sessions = h.u;
      if (h.id != 1 || nb == 2) continue;
      etch__pb_dec_init(&bs, h.data, h.len);
      while (etch__pb_next(&bs, &k))
        if (k.id == 12) sizes[nb] = k.u;
      nb++;
    }
  }
  ASSERT_EQ_INT(nb, 2);
  ASSERT_EQ_U64(sizes[0], 1024 * 1024);
  ASSERT_EQ_U64(sizes[1], 64 * 1024);
  ASSERT_EQ_U64(sessions, 1);
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
  raw_close(&r);
  svc_stop(&s);
}
