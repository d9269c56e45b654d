/*
 * svc_shmem_test.c - etchd end to end: the shared memory's size is the
 * service's, not the producer's; a producer's own memory must be sealed;
 * chunk layouts that once held a budgeted read.
 */
#define _GNU_SOURCE
#include "svc_test.h"

/* ---- the shared memory's size is the service's, not the producer's ---- */

/* A raw producer of `source`: connects, registers it and waits for
 * StartDataSource; the shared memory the service sent, mapped, into *smb,
 * its descriptor (kept open) into *fd. */
static void raw_source(raw *r, const svc *s, const char *source, uint8_t **smb,
                       int *fd, uint32_t *page_kb) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  raw_invoke(r, "InitializeConnection", NULL);
  etch__pb_nested d;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, source);
  etch__pb_nested_end(&b.s, &d);
  raw_invoke(r, "RegisterDataSource", &b);
  raw_invoke(r, "GetAsyncCommand", NULL);
  *smb = NULL;
  *fd = -1;
  *page_kb = 0;
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
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB) *page_kb = (uint32_t)sf.u;
        *fd = etch__ipc_conn_take_fd(&r->c);
        ASSERT_TRUE(*fd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(*fd, &st) == 0);
        *smb = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED, *fd, 0);
        ASSERT_TRUE(*smb != MAP_FAILED);
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE) {
        started = true;
      }
    }
  }
  ASSERT_TRUE(started && *smb && *page_kb);
  etch__pb_buf_reset(&b);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(r, "RegisterTraceWriter", &b);
  etch__pb_buf_free(&b);
}

/* Commits chunk 0 of `page` into target buffer 1. */
static void raw_commit(raw *r, uint32_t page) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, page);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  etch__pb_nested_end(&b.s, &m);
  raw_invoke(r, "CommitData", &b);
  etch__pb_buf_free(&b);
  etch__ipc_conn_flush(&r->c);
}

/* A producer that truncates the shared memory the service gave it, then
 * commits chunks in it: the memory is sealed, so it cannot; the service
 * stays up, its session and another one record exactly. (Unsealed, the
 * service's read of the committed chunk was a SIGBUS that killed it.) */
TEST(a_producer_cannot_shrink_the_shared_memory_under_the_service) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "shrunk",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\n"
                            "data_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  int fd;
  uint32_t page_kb;
  raw_source(&r, &s, "raw.source", &smb, &fd, &page_kb);
  ASSERT_EQ_INT(fcntl(fd, F_GET_SEALS),
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_kb * 1024 * 4,
                           page_kb * 1024));
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 0));
  raw_write_chunk(smb, page_kb * 1024, 1, 1, 1, 3);
  ASSERT_TRUE(etch__smb_release_complete(&m, 1, 0));
  /* Neither shrinking nor growing, nor unsealing. */
  errno = 0;
  ASSERT_EQ_INT(ftruncate(fd, 0), -1);
  ASSERT_EQ_INT(errno, EPERM);
  ASSERT_EQ_INT(ftruncate(fd, (off_t)page_kb * 1024), -1);
  ASSERT_EQ_INT(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  raw_commit(&r, 0);
  raw_commit(&r, 1);
  /* Another consumer and a producer of libetch, meanwhile. */
  char out2[700];
  snprintf(out2, sizeof out2, "%s/other.pftrace", s.dir);
  pid_t rec2 = record_start(&s, out2, NULL);
  pid_t p = producer("other", 1, 100);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec2, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec2), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out2, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 100);
  td_free(&t);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 8);
  ASSERT_EQ_INT(max_n, 4);
  munmap(smb, (size_t)page_kb * 1024 * 4);
  close(fd);
  raw_close(&r);
  svc_stop(&s);
}

/* InitializeConnection offering the producer's own memory (`fd`, pages of
 * `page` bytes); whether the service took it. */
static bool raw_offer_memory(raw *r, const svc *s, int fd, uint32_t page) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_ICR_PAGE_SIZE_HINT, page);
  etch__pb_write_varint_field(&b.s, ETCH_ICR_PRODUCER_PROVIDED_SHMEM, 1);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++r->req;
  f.service_id = r->svc;
  f.method_id = etch__ipc_method_id(&r->bind, "InitializeConnection");
  f.body.data = etch__pb_buf_data(&b);
  f.body.len = (uint32_t)etch__pb_buf_len(&b);
  ASSERT_OK(etch__ipc_conn_send(&r->c, &f, fd));
  etch__pb_buf_free(&b);
  etch_ipc_frame g;
  raw_next(r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(g.success);
  bool using = false;
  etch__pb_dec dec;
  etch__pb_field fl;
  etch__pb_dec_init(&dec, g.body.data, g.body.len);
  while (etch__pb_next(&dec, &fl))
    if (fl.id == ETCH_ICRESP_USING_PRODUCER_SHMEM) using = fl.u != 0;
  return using;
}

/* The service maps a producer's own memory only when it is sealed against
 * shrinking; unsealed, it is refused with the reason in the log, and the
 * service sends memory of its own with SetupTracing. */
TEST(a_producers_own_memory_must_be_sealed_against_shrinking) {
  svc s;
  svc_start(&s);
  const uint32_t page = 4096;
  int sealed = memfd_create("sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_TRUE(sealed >= 0);
  ASSERT_EQ_INT(ftruncate(sealed, 16 * page), 0);
  ASSERT_EQ_INT(fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  raw a;
  ASSERT_TRUE(raw_offer_memory(&a, &s, sealed, page));
  int loose = memfd_create("loose", MFD_CLOEXEC);
  ASSERT_TRUE(loose >= 0);
  ASSERT_EQ_INT(ftruncate(loose, 16 * page), 0);
  raw b;
  ASSERT_FALSE(raw_offer_memory(&b, &s, loose, page));
  int grow = memfd_create("grow", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_TRUE(grow >= 0);
  ASSERT_EQ_INT(ftruncate(grow, 16 * page), 0);
  ASSERT_EQ_INT(fcntl(grow, F_ADD_SEALS, F_SEAL_GROW), 0);
  raw c;
  ASSERT_FALSE(raw_offer_memory(&c, &s, grow, page));
  ASSERT_EQ_INT(log_lines(&s, "its shared memory refused: not sealed against "
                              "shrinking (F_SEAL_SHRINK); the service makes "
                              "one"),
                2);
  /* The refused one gets the service's memory, sealed, when it starts. */
  etch__pb_buf bb;
  etch__pb_buf_init(&bb, 64, 0);
  etch__pb_nested d;
  etch__pb_nested_begin(&bb.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&bb.s, ETCH_DSD_NAME, "raw.loose");
  etch__pb_nested_end(&bb.s, &d);
  raw_invoke(&b, "RegisterDataSource", &bb);
  raw_invoke(&b, "GetAsyncCommand", NULL);
  etch__pb_buf_free(&bb);
  char out[700];
  pid_t rec = record_config(&s, "loose",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.loose\" } }\n"
                            "flush_timeout_ms: 300\n"
                            "data_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  int got = -1;
  for (int i = 0; i < 20 && got < 0; i++) {
    etch_ipc_frame g;
    raw_next(&b, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl))
      if (fl.id == ETCH_GAC_SETUP_TRACING) got = etch__ipc_conn_take_fd(&b.c);
  }
  ASSERT_TRUE(got >= 0);
  ASSERT_EQ_INT(fcntl(got, F_GET_SEALS),
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  close(got);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  close(sealed);
  close(loose);
  close(grow);
  raw_close(&a);
  raw_close(&b);
  raw_close(&c);
  svc_stop(&s);
}

/* ---- chunk layouts that once held a budgeted read (issue: tracebuf) ---- */

/* Writes chunk 0 of `page` for writer 1 as chunk `chunk_id`: when `drop`,
 * a drop mark, then `n` packets "pkt-{first}".. (for_testing), then, when
 * `cont`, an empty fragment that goes on in the next chunk; both CONTINUES
 * flags when `cont`; completes it. */
static void raw_write_layout(uint8_t *smb, uint32_t page_size, uint32_t page,
                             uint32_t chunk_id, bool drop, int first, int n,
                             bool cont) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, page)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, page, ETCH_SMB_DIV1));
  uint16_t flags =
      cont ? ETCH_SMB_FIRST_CONTINUES | ETCH_SMB_LAST_CONTINUES : 0;
  uint8_t *c = NULL;
  /* The service frees a committed chunk when it has copied it (raw_sync
   * after each commit): it is free again at once. */
  c = etch__smb_try_acquire_write(&m, page, 0, 1, chunk_id, flags);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  uint16_t count = 0;
  if (drop) {
    etch__pb_put_redundant4(p, ETCH_SMB_DROP_PACKET);
    p += 4;
    count++;
  }
  for (int i = 0; i < n; i++) {
    char text[16];
    int tl = snprintf(text, sizeof text, "pkt-%d", first + i);
    etch__pb_put_redundant4(p, (uint32_t)(3 + tl));
    p += 4;
    *p++ = 0xa2;
    *p++ = 0x38;
    *p++ = (uint8_t)tl;
    memcpy(p, text, (size_t)tl);
    p += tl;
    count++;
  }
  if (cont) {
    etch__pb_put_redundant4(p, 0);
    p += 4;
    count++;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)(count | flags << 10),
                   __ATOMIC_RELEASE);
  ASSERT_TRUE(etch__smb_release_complete(&m, page, 0));
}

/* fuzz_tracebuf's layout through etchd: chunks that begin with a drop
 * mark and continue packets, committed, then committed again longer, into
 * a ring small enough to lose some of them unread, read at the end or
 * written into the consumer's file every 100 ms, while an honest producer
 * records into another session. The recording ends with every honest
 * tick, none of the raw packets twice, and etchd serves the next session
 * exactly. Into the file, the first chunks are read before their longer
 * copy comes, which puts a drop mark before what was read: a skip over
 * the read fragments that stopped at a drop mark handed the same packets
 * out again (and, when etchd leaves such a packet out, kept a read with a
 * small budget from ever getting further). */
TEST(a_producers_chunk_layout_cannot_hold_a_read) {
  for (int mode = 0; mode < 2; mode++) {
    svc s;
    svc_start(&s);
    /* The hostile session first: its buffer is etchd's buffer 1, the one
     * raw_source's writer targets. */
    char out[700];
    pid_t rec = record_config(
        &s, mode ? "layout-file" : "layout",
        mode ? "buffers { size_kb: 64 }\n"
               "data_sources { config { name: \"raw.source\" } }\n"
               "write_into_file: true\nfile_write_period_ms: 100\n"
               "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n"
             : "buffers { size_kb: 64 }\n"
               "data_sources { config { name: \"raw.source\" } }\n"
               "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
        NULL, out, sizeof out);
    /* An honest session beside it, with a producer of libetch. */
    char out2[700];
    snprintf(out2, sizeof out2, "%s/honest.pftrace", s.dir);
    pid_t rec2 = record_start(&s, out2, NULL);
    raw r;
    uint8_t *smb;
    int fd;
    uint32_t page_kb;
    raw_source(&r, &s, "raw.source", &smb, &fd, &page_kb);
    pid_t p = producer("honest", 2, 2000);
    int next = 0;
    for (uint32_t id = 0; id < 400; id++) {
      uint32_t page = id % 4;
      int n = 1 + (int)(id % 7) * 8;
      bool read_first = mode == 1 && id < 4;
      /* The first copy: two packets, or a drop mark and one. */
      raw_write_layout(smb, page_kb * 1024, page, id, !read_first, next,
                       read_first ? 2 : 1, !read_first);
      raw_commit(&r, page);
      raw_sync(&r);
      if (read_first) { /* until etchd wrote them into the file */
        int max_n = -1;
        WAIT_UNTIL(count_testing(out, &max_n) >= 0 && max_n >= next + 1,
                   "pkt-%d never reached %s", next + 1, out);
      }
      /* The same chunk again, longer, a drop mark first: its first two
       * fragments hold what the first copy's did (and were read). */
      if (read_first)
        raw_write_layout(smb, page_kb * 1024, page, id, true, next + 1, n + 1,
                         false);
      else
        raw_write_layout(smb, page_kb * 1024, page, id, true, next, n + 1,
                         true);
      raw_commit(&r, page);
      raw_sync(&r);
      next += n + 2;
    }
    ASSERT_EQ_INT(wait_exit(p), 0);
    kill(rec2, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec2), 0);
    kill(rec, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec), 0);
    /* Each raw packet at most once (some went with the ring). */
    size_t len;
    uint8_t *d = etch_test_read_file(out, &len);
    ASSERT_TRUE(d != NULL);
    static uint8_t seen[40000];
    memset(seen, 0, sizeof seen);
    int raw_n = 0;
    etch__pb_dec dec, pk;
    etch__pb_field f, g;
    etch__pb_dec_init(&dec, d, len);
    while (etch__pb_next(&dec, &f)) {
      etch__pb_dec_init(&pk, f.data, f.len);
      while (etch__pb_next(&pk, &g))
        if (g.id == 900 && g.wt == 2 && g.len > 4 &&
            !memcmp(g.data, "pkt-", 4)) {
          int k = atoi((const char *)g.data + 4);
          ASSERT_TRUE(k >= 0 && k < next && k < (int)sizeof seen);
          ASSERT_EQ_INT(seen[k], 0);
          seen[k] = 1;
          raw_n++;
        }
    }
    free(d);
    ASSERT_TRUE(raw_n > 0);
    td_trace t;
    static int32_t pids[4096];
    decode(out2, &t, pids, 4096);
    check_ticks(&t, pids, 4096, p, 0, 2000);
    check_ticks(&t, pids, 4096, p, 1, 2000);
    td_free(&t);
    munmap(smb, (size_t)page_kb * 1024 * 4);
    close(fd);
    raw_close(&r);
    ASSERT_EQ_INT(log_lines(&s, "made no progress"), 0);
    records_exactly(&s, "after-layout"); /* etchd serves on */
    svc_stop(&s);
  }
}
