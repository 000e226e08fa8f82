/* Tests of the C ABI against real redis-server nodes whose URLs are given as arguments.
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind --leak-check=full --error-exitcode=1. Exit status 0 only if every check passed. */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    checks++;                                                                \
    if (!(cond)) {                                                           \
      failures++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                        \
  } while (0)

#define CHECK_STATUS(expr, want)                                                        \
  do {                                                                                  \
    redlock_status got_ = (expr);                                                       \
    checks++;                                                                           \
    if (got_ != (want)) {                                                               \
      failures++;                                                                       \
      fprintf(stderr, "%s:%d: %s returned %s (%d), want %s\n", __FILE__, __LINE__, #expr, \
              redlock_status_str(got_), (int)got_, redlock_status_str(want));           \
    }                                                                                   \
  } while (0)

static const char **urls;
static int n_urls;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Milliseconds since t0 (CLOCK_MONOTONIC). */
static long ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static redlock_manager *make_manager(uint32_t retries, uint32_t delay_ms) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  CHECK(cfg != NULL);
  for (int i = 0; i < n_urls; i++) CHECK_STATUS(redlock_config_add_node(cfg, urls[i], err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, retries, delay_ms, err, sizeof err), REDLOCK_STATUS_OK);
  /* Generous timeouts: CI machines are small and busy, and this program also runs under
   * valgrind, which slows it many times over. No node here is ever down or stopped, so a
   * timeout only costs time when a node is slow to answer, and then waiting helps. */
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "manager: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && mgr != NULL);
  redlock_config_free(cfg);
  return mgr;
}

static void test_status_strings(void) {
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_OK), "ok") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_NOT_ACQUIRED), "not acquired") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_NOT_HELD), "not held") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_UNAVAILABLE), "unavailable") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_AUTH), "authentication failed") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_CANCELLED), "cancelled") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_INVALID_ARGUMENT), "invalid argument") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_NULL_ARGUMENT), "null argument") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_INVALID_HANDLE), "invalid handle") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_INTERNAL), "internal error") == 0);
  CHECK(strcmp(redlock_status_str(REDLOCK_STATUS_PANIC), "panic") == 0);
  int out_of_range[] = {-1, 6, 9, 13, 21, 98, 100, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof out_of_range / sizeof *out_of_range; i++) {
    const char *s = redlock_status_str(out_of_range[i]);
    CHECK(s != NULL && strcmp(s, "unknown status") == 0);
  }
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", REDLOCK_VERSION_MAJOR, REDLOCK_VERSION_MINOR,
           REDLOCK_VERSION_PATCH);
  CHECK(strcmp(redlock_version(), want) == 0);
  CHECK(strcmp(redlock_version(), REDLOCK_VERSION) == 0);
}

static void test_null_arguments(void) {
  char err[128];
  const uint8_t *r = (const uint8_t *)"r";
  redlock_lease *lease = (redlock_lease *)0x1; /* sentinel: must stay untouched */
  redlock_manager *mgr = (redlock_manager *)0x1;

  /* Frees accept NULL. */
  redlock_config_free(NULL);
  redlock_manager_free(NULL);
  redlock_lease_free(NULL);

  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(NULL, "127.0.0.1:1", err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "cfg") != NULL);
  CHECK_STATUS(redlock_config_add_node(cfg, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "url") != NULL);
  CHECK_STATUS(redlock_config_set_retry(NULL, 1, 1, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_drift_factor(NULL, 0.01, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_timeouts(NULL, 1, 1, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_manager_new(NULL, &mgr, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(mgr == (redlock_manager *)0x1);
  CHECK_STATUS(redlock_config_add_node(cfg, "127.0.0.1:1", NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_manager_new(cfg, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_config_free(cfg);

  CHECK_STATUS(redlock_lock(NULL, r, 1, 1000, &lease, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_try_lock(NULL, r, 1, 1000, &lease, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_lock_wait(NULL, r, 1, 1000, 10, &lease, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(lease == (redlock_lease *)0x1);
  CHECK_STATUS(redlock_extend(NULL, 1000, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_unlock(NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "lease") != NULL);
  CHECK(redlock_lease_validity_ms(NULL) == 0);
  CHECK(!redlock_lease_is_valid(NULL));
  CHECK(redlock_lease_token(NULL) == NULL);
  size_t len = 77;
  CHECK(redlock_lease_resource(NULL, &len) == NULL && len == 77);
  CHECK(redlock_lease_resource_at(NULL, 0, &len) == NULL && len == 77);
  CHECK(redlock_lease_resource_count(NULL) == 0);
  CHECK(!redlock_lease_is_shared(NULL));
  CHECK(!redlock_lease_permit(NULL, NULL, NULL));
  CHECK(redlock_lease_node_count(NULL) == 0);
  CHECK(redlock_lease_granted(NULL) == 0);
  CHECK(redlock_lease_node_outcomes(NULL, NULL, 0) == 0);
  CHECK(redlock_manager_node_count(NULL) == 0);
  CHECK(redlock_manager_quorum(NULL) == 0);

  /* A NULL error buffer is fine, so is a zero length. */
  CHECK_STATUS(redlock_unlock(NULL, NULL, 0), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_unlock(NULL, err, 0), REDLOCK_STATUS_NULL_ARGUMENT);

  /* NULL mgr/out/resource on a live manager. */
  redlock_manager *live = make_manager(0, 0);
  CHECK_STATUS(redlock_lock(live, r, 1, 1000, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_try_lock(live, NULL, 5, 1000, &lease, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "resource") != NULL);
  CHECK(lease == (redlock_lease *)0x1);
  redlock_manager_free(live);
}

/* Handles that are not live handles: forged from a zeroed buffer (what valgrind accepts; a real
 * use after free would be an invalid read under valgrind). The check is best effort: it catches
 * a freed handle only while its memory is not reused. */
static void test_invalid_handles(void) {
  static uint64_t zeros[512]; /* 4 KiB of zeroes, 8-aligned: bigger than any handle */
  char err[128];
  const uint8_t *r = (const uint8_t *)"r";
  redlock_config *cfg = (redlock_config *)zeros;
  redlock_manager *mgr = (redlock_manager *)zeros;
  redlock_acquire_opts *opts = (redlock_acquire_opts *)zeros;
  redlock_cancel *cancel = (redlock_cancel *)zeros;
  redlock_lease *lease = (redlock_lease *)zeros;
  redlock_lease *out = (redlock_lease *)0x1; /* sentinel: must stay untouched */
  redlock_manager *out_mgr = (redlock_manager *)0x1;

  CHECK_STATUS(redlock_config_add_node(cfg, "127.0.0.1:1", err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(strstr(err, "cfg is not a live redlock_config") != NULL);
  CHECK_STATUS(redlock_config_set_retry(cfg, 1, 1, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK_STATUS(redlock_manager_new(cfg, &out_mgr, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(out_mgr == (redlock_manager *)0x1);

  CHECK_STATUS(redlock_lock(mgr, r, 1, 1000, &out, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(strstr(err, "mgr is not a live redlock_manager") != NULL);
  CHECK_STATUS(redlock_acquire(mgr, r, 1, 1000, NULL, &out, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  size_t r_len = 1;
  CHECK_STATUS(redlock_acquire_many(mgr, &r, &r_len, 1, 1000, NULL, &out, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(strstr(err, "mgr is not a live redlock_manager") != NULL);
  CHECK(out == (redlock_lease *)0x1);
  CHECK(redlock_manager_node_count(mgr) == 0);
  CHECK(redlock_manager_quorum(mgr) == 0);
  CHECK(redlock_manager_metrics(mgr, NULL, 0) == 0);

  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 10), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK_STATUS(redlock_acquire_opts_set_shared(opts, true), REDLOCK_STATUS_INVALID_HANDLE);
  redlock_acquire_opts *live_opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_cancel(live_opts, cancel), REDLOCK_STATUS_INVALID_HANDLE);
  redlock_acquire_opts_free(live_opts);
  redlock_cancel_fire(cancel); /* a no-op */
  CHECK(!redlock_cancel_is_fired(cancel));

  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(strstr(err, "lease is not a live redlock_lease") != NULL);
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(redlock_lease_validity_ms(lease) == 0);
  CHECK(!redlock_lease_is_valid(lease));
  CHECK(redlock_lease_token(lease) == NULL);
  CHECK(redlock_lease_fencing_token(lease) == 0);
  CHECK(redlock_lease_resource_count(lease) == 0);
  CHECK(redlock_lease_resource_at(lease, 0, NULL) == NULL);
  CHECK(!redlock_lease_is_shared(lease));

  /* The frees ignore them and write nothing. */
  redlock_config_free(cfg);
  redlock_manager_free(mgr);
  redlock_acquire_opts_free(opts);
  redlock_cancel_free(cancel);
  redlock_lease_free(lease);
  int all_zero = 1;
  for (size_t i = 0; i < sizeof zeros / sizeof *zeros; i++) all_zero &= zeros[i] == 0;
  CHECK(all_zero);
}

static void test_bad_input(void) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  redlock_manager *mgr = (redlock_manager *)0x1;
  /* A manager with no nodes. */
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "at least one node") != NULL);
  CHECK(mgr == (redlock_manager *)0x1);
  /* Malformed URLs, and the password never appears in the message. */
  const char *bad[] = {"", "not a url", "127.0.0.1", "redis://127.0.0.1:99999", "rediss://127.0.0.1:0",
                       "redis://:hunter2@127.0.0.1:0", "redis://127.0.0.1:1/x",
                       /* beyond what SELECT accepts (a C int): refused now, not at connect */
                       "redis://:hunter2@127.0.0.1:1/99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_STATUS(redlock_config_add_node(cfg, bad[i], err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(err, "hunter2") == NULL);
  }
  CHECK_STATUS(redlock_config_set_drift_factor(cfg, 1.0, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_drift_factor(cfg, -0.5, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_drift_factor(cfg, 0.02, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 0, 10, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  /* A node listed twice. */
  CHECK_STATUS(redlock_config_add_node(cfg, urls[0], err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, urls[0], err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "listed twice") != NULL);
  redlock_config_free(cfg);

  mgr = make_manager(0, 0);
  redlock_lease *lease = (redlock_lease *)0x1;
  /* (NULL, 0) is the empty name: invalid, not a NULL argument. */
  CHECK_STATUS(redlock_try_lock(mgr, NULL, 0, 1000, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "empty") != NULL);
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"r", 1, 0, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "TTL") != NULL);
  CHECK_STATUS(redlock_lock(mgr, (const uint8_t *)"r", 1, 2, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  static uint8_t big[REDLOCK_MAX_RESOURCE_LEN + 1];
  memset(big, 'b', sizeof big);
  CHECK_STATUS(redlock_try_lock(mgr, big, sizeof big, 1000, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(lease == (redlock_lease *)0x1);
  /* Messages are truncated to the buffer and always NUL-terminated. */
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  CHECK_STATUS(redlock_try_lock(mgr, NULL, 0, 1000, &lease, tiny, sizeof tiny), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strlen(tiny) == sizeof tiny - 1);
  char one[1] = {'x'};
  CHECK_STATUS(redlock_try_lock(mgr, NULL, 0, 1000, &lease, one, 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(one[0] == '\0');
  redlock_manager_free(mgr);
}

static void test_lock_unlock_extend(void) {
  char err[512];
  redlock_manager *mgr = make_manager(3, 50);
  CHECK(redlock_manager_node_count(mgr) == (size_t)n_urls);
  CHECK(redlock_manager_quorum(mgr) == (size_t)n_urls / 2 + 1);

  /* A resource with a NUL, CR and LF in it. */
  const uint8_t res[] = {'c', 0, '\r', '\n', 0xff};
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_lock(mgr, res, sizeof res, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(lease != NULL);
  if (!lease) return;
  uint32_t v = redlock_lease_validity_ms(lease);
  /* The TTL less the drift (1 %) and the time since the step began: a busy machine under
   * valgrind may take most of a second for that, not two. */
  CHECK(v > 8000 && v <= 10000);
  CHECK(redlock_lease_is_valid(lease));
  CHECK(strlen(redlock_lease_token(lease)) == 40);
  size_t len = 0;
  const uint8_t *got = redlock_lease_resource(lease, &len);
  CHECK(len == sizeof res && memcmp(got, res, len) == 0);
  CHECK(redlock_lease_granted(lease) >= redlock_manager_quorum(mgr));
  redlock_node_outcome outcomes[16];
  size_t n = redlock_lease_node_outcomes(lease, outcomes, 16);
  CHECK(n == (size_t)n_urls);
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(outcomes[i] == REDLOCK_NODE_SUCCESS || outcomes[i] == REDLOCK_NODE_PENDING);
    ok += outcomes[i] == REDLOCK_NODE_SUCCESS;
  }
  CHECK(ok == redlock_lease_granted(lease));
  CHECK(redlock_lease_node_outcomes(lease, NULL, 0) == (size_t)n_urls);

  /* Held: a second one-shot attempt is refused and names the nodes. */
  redlock_lease *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, res, sizeof res, 10000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK(strstr(err, "not acquired") != NULL && strstr(err, "node ") != NULL);

  CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_validity_ms(lease) > 19000);
  CHECK_STATUS(redlock_extend(lease, 0, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);

  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_validity_ms(lease) == 0);
  CHECK(!redlock_lease_is_valid(lease));
  /* Double unlock, and extend after unlock. */
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  redlock_lease_free(lease);

  /* Free again: a one-shot attempt succeeds. */
  CHECK_STATUS(redlock_try_lock(mgr, res, sizeof res, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);

  /* redlock_lock_wait gives up at its deadline while the lock is held. */
  CHECK_STATUS(redlock_try_lock(mgr, res, sizeof res, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_STATUS(redlock_lock_wait(mgr, res, sizeof res, 1000, 300, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long waited = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  CHECK(waited >= 300 && waited < 5000);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static void test_expiry(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"exp", 3, 150, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  sleep_ms(300);
  CHECK(redlock_lease_validity_ms(lease) == 0);
  CHECK(!redlock_lease_is_valid(lease));
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  /* Someone else can take it now. */
  redlock_lease *next = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"exp", 3, 1000, &next, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(next, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(next);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static void test_free_orders(void) {
  char err[512];
  /* Manager first, then the lease: the lease stays usable. */
  redlock_manager *mgr = make_manager(0, 0);
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"order1", 6, 5000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager_free(mgr);
  CHECK(redlock_lease_is_valid(lease));
  CHECK_STATUS(redlock_extend(lease, 5000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);

  /* Lease first (without unlocking: it expires by itself), then the manager. */
  mgr = make_manager(0, 0);
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"order2", 6, 5000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  /* Freeing did not unlock: the resource is still held. */
  redlock_lease *again = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"order2", 6, 5000, &again, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  redlock_manager_free(mgr);
}

struct lost_note {
  volatile int calls;
  volatile int was_lost;
  volatile uint32_t validity;
  volatile int freed_itself;
};

static void on_lost(redlock_lease *lease, void *userdata) {
  struct lost_note *n = userdata;
  n->was_lost = redlock_lease_is_lost(lease);
  n->validity = redlock_lease_validity_ms(lease);
  __atomic_add_fetch(&n->calls, 1, __ATOMIC_SEQ_CST);
}

static void on_lost_free_self(redlock_lease *lease, void *userdata) {
  struct lost_note *n = userdata;
  char err[256];
  /* Allowed from the callback: unlock (NOT_HELD: it is lost) and free this very lease. */
  n->was_lost = redlock_unlock(lease, err, sizeof err) == REDLOCK_STATUS_NOT_HELD;
  redlock_lease_free(lease);
  __atomic_store_n(&n->freed_itself, 1, __ATOMIC_SEQ_CST);
}

static void test_auto_renew(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  CHECK_STATUS(redlock_lease_auto_renew(NULL, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(!redlock_lease_is_lost(NULL));
  CHECK(!redlock_lease_wait_lost(NULL, 0));
  redlock_lease_stop_renewal(NULL);

  /* A 1.5 s lock renewed for 3 s: valid throughout, then lost at the bound. (A TTL of 1.5 s:
   * a renewal late by most of a second, as on a busy machine under valgrind, is no loss.)
   * Each check counts only if it was made before the bound (from before the acquisition):
   * sleeps that a busy machine stretches must not carry a check past it. */
  struct lost_note note = {0, 0, 99, 0};
  redlock_lease *lease = NULL;
  struct timespec acquiring;
  clock_gettime(CLOCK_MONOTONIC, &acquiring);
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"renewed", 7, 1500, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  CHECK_STATUS(redlock_lease_auto_renew(lease, 3000, 0, on_lost, &note, err, sizeof err), REDLOCK_STATUS_OK);
  int checked = 0;
  while (ms_since(&acquiring) < 2500) {
    sleep_ms(100);
    uint32_t valid = redlock_lease_validity_ms(lease);
    bool lost = redlock_lease_is_lost(lease);
    if (ms_since(&acquiring) >= 3000) break; /* the bound may have come meanwhile */
    CHECK(valid > 0 && !lost);
    checked++;
  }
  CHECK(checked > 0);
  CHECK(redlock_lease_wait_lost(lease, 5000));
  CHECK(redlock_lease_is_lost(lease));
  CHECK(redlock_lease_validity_ms(lease) == 0);
  for (int i = 0; i < 100 && note.calls == 0; i++) sleep_ms(10);
  CHECK(note.calls == 1 && note.was_lost && note.validity == 0);
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  redlock_lease_free(lease);

  /* A callback that unlocks and frees its own lease. */
  struct lost_note self = {0, 0, 0, 0};
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"selffree", 8, 300, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 1, on_lost_free_self, &self, err, sizeof err), REDLOCK_STATUS_OK);
  for (int i = 0; i < 300 && !self.freed_itself; i++) sleep_ms(10);
  CHECK(self.freed_itself && self.was_lost);

  /* Freeing a lease while it is being renewed stops the renewal; the lock then expires. */
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"freed", 5, 300, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, on_lost, &note, err, sizeof err), REDLOCK_STATUS_OK);
  sleep_ms(150);
  redlock_lease_free(lease);
  redlock_lease *again = NULL;
  CHECK_STATUS(redlock_lock_wait(mgr, (const uint8_t *)"freed", 5, 300, 2000, &again, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(again, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(again);

  /* Unlock stops renewal; stop_renewal alone leaves the lock to expire (1 s TTL: renewed
   * every third of it, late by most of a second on a busy machine without being lost). */
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"stopped", 7, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  sleep_ms(500);
  redlock_lease_stop_renewal(lease);
  CHECK(!redlock_lease_is_lost(lease));
  sleep_ms(1200); /* the last renewal's step began before the stop: expired a TTL after */
  CHECK(redlock_lease_validity_ms(lease) == 0);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static void test_fencing_and_accessors(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  redlock_lease *lease = (redlock_lease *)0x1;
  const uint8_t *res = (const uint8_t *)"fenced";
  /* Bad flag combinations change nothing. */
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_ONCE | REDLOCK_LOCK_WAIT, 100, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, 64, 0, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_lock_opts(NULL, res, 6, 5000, 0, 0, &lease, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(lease == (redlock_lease *)0x1);
  CHECK(redlock_lease_fencing_token(NULL) == 0);
  CHECK(!redlock_lease_is_renewing(NULL));
  CHECK(redlock_lease_lost_reason(NULL, err, sizeof err) == 0);
  CHECK(redlock_lease_ttl_ms(NULL) == 0);

  /* Fenced grants count up; a plain one has token 0. */
  uint64_t last = 0;
  for (int i = 0; i < 5; i++) {
    lease = NULL;
    CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_FENCED | REDLOCK_LOCK_ONCE, 0, &lease, err, sizeof err), REDLOCK_STATUS_OK);
    if (!lease) return;
    uint64_t t = redlock_lease_fencing_token(lease);
    CHECK(t > last);
    last = t;
    CHECK(redlock_lease_ttl_ms(lease) == 5000);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  lease = NULL;
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_WAIT, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_fencing_token(lease) == 0);
  /* Held: a fenced attempt is refused. */
  redlock_lease *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_FENCED | REDLOCK_LOCK_ONCE, 0, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK_STATUS(redlock_extend(lease, 7000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_ttl_ms(lease) == 7000);

  /* Renewal state and the reason a lease was lost. */
  CHECK(!redlock_lease_is_renewing(lease));
  CHECK(!redlock_lease_wait_lost(lease, 10000)); /* renewal off: returns at once */
  CHECK_STATUS(redlock_lease_auto_renew(lease, 300, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_is_renewing(lease));
  CHECK(redlock_lease_lost_reason(lease, err, sizeof err) == 0);
  CHECK(redlock_lease_wait_lost(lease, 5000));
  CHECK(!redlock_lease_is_renewing(lease));
  char why[256] = {0};
  size_t why_len = redlock_lease_lost_reason(lease, why, sizeof why);
  CHECK(why_len > 0 && why_len == strlen(why));
  CHECK(strstr(why, "maximum hold time") != NULL);
  CHECK(redlock_lease_lost_reason(lease, NULL, 0) == why_len);
  char cut[8];
  CHECK(redlock_lease_lost_reason(lease, cut, sizeof cut) == why_len && strlen(cut) == 7);
  redlock_lease_free(lease);

  /* wait_lost returns as soon as an unlock ends the renewal. */
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"waited", 6, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_stop_renewal(lease);
  CHECK(!redlock_lease_is_renewing(lease));
  CHECK(!redlock_lease_wait_lost(lease, 10000));
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static redlock_manager *quarantined_manager(uint32_t max_ttl_ms) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  for (int i = 0; i < n_urls; i++) redlock_config_add_node(cfg, urls[i], err, sizeof err);
  CHECK_STATUS(redlock_config_set_max_ttl(cfg, max_ttl_ms, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_restart_quarantine(cfg, true, err, sizeof err), REDLOCK_STATUS_OK);
  /* Generous timeouts, as make_manager's. */
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, 0, 0, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  return mgr;
}

static void test_quarantine(void) {
  char err[512];
  CHECK_STATUS(redlock_config_set_max_ttl(NULL, 1000, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_restart_quarantine(NULL, true, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_config *bad = redlock_config_new();
  CHECK_STATUS(redlock_config_set_max_ttl(bad, 2, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  redlock_config_free(bad);

  /* Quarantine on with the default 60 s maximum TTL, on nodes started seconds ago: a
   * brand-new cluster (no node has a marker, every node is younger than the maximum TTL) is
   * trusted at once, and the first try succeeds. */
  redlock_manager *mgr = quarantined_manager(60000);
  if (!mgr) return;
  redlock_lease *lease = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"q", 1, 60001, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "maximum TTL") != NULL);
  bool q = true;
  uint32_t left = 12345;
  CHECK_STATUS(redlock_manager_node_state(NULL, 0, &q, &left, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_manager_node_state(mgr, (size_t)n_urls, &q, &left, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(q && left == 12345);
  /* Nothing is known before the first connection. */
  CHECK_STATUS(redlock_manager_node_state(mgr, 0, &q, &left, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(!q && left == 0);
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"q", 1, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_node_outcome outcomes[16];
  size_t n = redlock_lease_node_outcomes(lease, outcomes, 16);
  for (size_t i = 0; i < n; i++) CHECK(outcomes[i] != REDLOCK_NODE_QUARANTINED);
  for (int i = 0; i < n_urls; i++) {
    CHECK_STATUS(redlock_manager_node_state(mgr, (size_t)i, &q, &left, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK(!q && left == 0);
    CHECK(redlock_manager_node_quarantine_reason(mgr, (size_t)i) == REDLOCK_QUARANTINE_NONE);
  }
  CHECK(redlock_manager_node_quarantine_reason(NULL, 0) == REDLOCK_QUARANTINE_NONE);
  CHECK(redlock_manager_node_quarantine_reason(mgr, (size_t)n_urls) == REDLOCK_QUARANTINE_NONE);
  /* The numbers are stable. */
  CHECK(REDLOCK_QUARANTINE_NO_MARKER == 1 && REDLOCK_QUARANTINE_STALE_MARKER == 2 &&
        REDLOCK_QUARANTINE_RESTART_SEEN == 3 && REDLOCK_QUARANTINE_YOUNG == 4 &&
        REDLOCK_QUARANTINE_UNDECIDED == 5);
  CHECK_STATUS(redlock_manager_node_state(mgr, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);

  /* A second manager, in the same process but knowing nothing, meets the same nodes: they
   * hold their markers now, so they count at once too. */
  mgr = quarantined_manager(1000);
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"q", 1, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  n = redlock_lease_node_outcomes(lease, outcomes, 16);
  for (size_t i = 0; i < n; i++) CHECK(outcomes[i] != REDLOCK_NODE_QUARANTINED);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static void test_metrics(void) {
  char err[256];
  redlock_manager *mgr = make_manager(0, 0);
  CHECK(redlock_manager_metrics(NULL, NULL, 0) == 0);
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"metered", 7, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  /* snprintf-style: size first, then the whole text. */
  size_t need = redlock_manager_metrics(mgr, NULL, 0);
  CHECK(need > 100);
  char small[16];
  CHECK(redlock_manager_metrics(mgr, small, sizeof small) == need);
  CHECK(strlen(small) == sizeof small - 1);
  char *buf = malloc(need + 1);
  CHECK(redlock_manager_metrics(mgr, buf, need + 1) == need);
  CHECK(strlen(buf) == need);
  CHECK(strstr(buf, "redlock_acquire_total{result=\"granted\"} 1\n") != NULL);
  CHECK(strstr(buf, "redlock_unlock_total{result=\"ok\"} 1\n") != NULL);
  CHECK(strstr(buf, "# TYPE redlock_node_latency_seconds histogram") != NULL);
  free(buf);
  redlock_manager_free(mgr);
}

#define THREADS 8
#define ROUNDS 15

struct shared {
  redlock_manager *mgr;
  volatile long counter;
  volatile int inside;
  volatile int overlaps;
  volatile int errors;
  pthread_mutex_t stats;
};

static void *worker(void *arg) {
  struct shared *s = arg;
  char err[512];
  for (int i = 0; i < ROUNDS; i++) {
    redlock_lease *lease = NULL;
    redlock_status st = redlock_lock_wait(s->mgr, (const uint8_t *)"counter", 7, 30000, 120000, &lease,
                                          err, sizeof err);
    if (st != REDLOCK_STATUS_OK) {
      pthread_mutex_lock(&s->stats);
      s->errors++;
      pthread_mutex_unlock(&s->stats);
      fprintf(stderr, "worker lock: %s\n", err);
      continue;
    }
    if (__atomic_exchange_n(&s->inside, 1, __ATOMIC_SEQ_CST)) __atomic_add_fetch(&s->overlaps, 1, __ATOMIC_SEQ_CST);
    long v = s->counter; /* deliberately non-atomic read-modify-write */
    sleep_ms(1);
    s->counter = v + 1;
    __atomic_store_n(&s->inside, 0, __ATOMIC_SEQ_CST);
    st = redlock_unlock(lease, err, sizeof err);
    if (st != REDLOCK_STATUS_OK) {
      pthread_mutex_lock(&s->stats);
      s->errors++;
      pthread_mutex_unlock(&s->stats);
      fprintf(stderr, "worker unlock: %s\n", err);
    }
    redlock_lease_free(lease);
  }
  return NULL;
}

/* Two of three nodes refuse the credentials (these nodes require no password, so AUTH with
 * one fails): the quorum is lost to authentication, which has its own status. */

struct waiter {
  redlock_manager *mgr;
  redlock_acquire_opts *opts;
  redlock_status status;
  redlock_lease *lease;
  struct timespec done;
};

static const uint8_t WAITED[] = "c-waited";

static void *wait_for_lock(void *arg) {
  struct waiter *w = arg;
  char err[512];
  w->status = redlock_acquire(w->mgr, WAITED, sizeof WAITED - 1, 30000, w->opts, &w->lease, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &w->done);
  return NULL;
}

/* Waiting by notification and cancellation from another thread. The waiter's retry delay is
 * 30 s, so a waiter that gets the lock within 3 s of the release was woken, not polling (a
 * poller's pause is random, under 3 s one time in ten). The bounds are fractions of what
 * the alternative would take, not milliseconds: this runs under valgrind on busy machines
 * too. The figures are printed. */
static void test_wait_and_cancel(void) {
  char err[512];
  redlock_manager *holder = make_manager(0, 5000);
  redlock_manager *mgr = make_manager(0, 30000);
  redlock_lease *held = NULL;
  CHECK_STATUS(redlock_try_lock(holder, WAITED, sizeof WAITED - 1, 30000, &held, err, sizeof err), REDLOCK_STATUS_OK);

  /* Cancelled mid-wait from another thread: CANCELLED at once, nothing left behind. */
  redlock_cancel *cancel = redlock_cancel_new();
  CHECK(cancel != NULL);
  CHECK(!redlock_cancel_is_fired(cancel));
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 20000), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_cancel(opts, cancel), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_cancel(NULL, cancel), REDLOCK_STATUS_NULL_ARGUMENT);
  struct waiter w = {mgr, opts, REDLOCK_STATUS_OK, NULL, {0, 0}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
  sleep_ms(300);
  struct timespec fired;
  clock_gettime(CLOCK_MONOTONIC, &fired);
  redlock_cancel_fire(cancel);
  redlock_cancel_fire(cancel); /* idempotent */
  pthread_join(t, NULL);
  long took = (w.done.tv_sec - fired.tv_sec) * 1000 + (w.done.tv_nsec - fired.tv_nsec) / 1000000;
  printf("cancelled wait returned %ld ms after fire\n", took);
  CHECK_STATUS(w.status, REDLOCK_STATUS_CANCELLED);
  CHECK(w.lease == NULL);
  CHECK(took < 5000); /* at once: without the cancel the wait lasts 20 s */
  CHECK(redlock_cancel_is_fired(cancel));
  /* The options keep the handle alive: freeing it first is safe. */
  redlock_cancel_free(cancel);
  redlock_cancel_free(NULL);
  redlock_cancel_fire(NULL);
  CHECK(!redlock_cancel_is_fired(NULL));
  /* A fired handle: CANCELLED again, without waiting. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  redlock_lease *none = NULL;
  CHECK_STATUS(redlock_acquire(mgr, WAITED, sizeof WAITED - 1, 30000, opts, &none, err, sizeof err), REDLOCK_STATUS_CANCELLED);
  CHECK(strstr(err, "cancelled") != NULL);
  CHECK(ms_since(&t0) < 5000); /* without waiting: the lock is held for 30 s */

  /* Woken by the release: a new wait, without a cancel handle. */
  CHECK_STATUS(redlock_acquire_opts_set_cancel(opts, NULL), REDLOCK_STATUS_OK);
  w.lease = NULL;
  CHECK(pthread_create(&t, NULL, wait_for_lock, &w) == 0);
  sleep_ms(300);
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(held, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(held);
  pthread_join(t, NULL);
  long gap = (w.done.tv_sec - released.tv_sec) * 1000 + (w.done.tv_nsec - released.tv_nsec) / 1000000;
  printf("woken waiter granted %ld ms after the release\n", gap);
  CHECK_STATUS(w.status, REDLOCK_STATUS_OK);
  CHECK(gap < 3000);
  if (w.lease) {
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(w.lease);
  }
  /* Nothing of the cancelled waiter was left: the resource is free. */
  CHECK_STATUS(redlock_try_lock(holder, WAITED, sizeof WAITED - 1, 1000, &held, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(held, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(held);
  CHECK_STATUS(redlock_acquire_opts_set_notify(opts, false), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_notify(NULL, false), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_acquire_opts_free(opts);
  redlock_manager_free(mgr);
  redlock_manager_free(holder);
}

static void test_auth_failure(void) {
  char err[1024];
  char wrong[2][128];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, urls[0], err, sizeof err), REDLOCK_STATUS_OK);
  for (int i = 0; i < 2; i++) {
    const char *hostport = strstr(urls[1 + i], "://");
    CHECK(hostport != NULL);
    snprintf(wrong[i], sizeof wrong[i], "redis://:wrong-pw@%s", hostport ? hostport + 3 : "");
    CHECK_STATUS(redlock_config_add_node(cfg, wrong[i], err, sizeof err), REDLOCK_STATUS_OK);
  }
  CHECK_STATUS(redlock_config_set_retry(cfg, 0, 0, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  redlock_lease *lease = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_lock(mgr, (const uint8_t *)"c-auth", 6, 5000, &lease, err, sizeof err),
               REDLOCK_STATUS_AUTH);
  CHECK(lease == (redlock_lease *)0x1);
  CHECK(strstr(err, "authentication failed") != NULL);
  CHECK(strstr(err, "wrong-pw") == NULL);
  redlock_manager_free(mgr);
}

static void test_contention(void) {
  struct shared s = {.mgr = make_manager(3, 20), .counter = 0, .inside = 0, .overlaps = 0, .errors = 0};
  pthread_mutex_init(&s.stats, NULL);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, &s) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  CHECK(s.errors == 0);
  CHECK(s.overlaps == 0);
  CHECK(s.counter == THREADS * ROUNDS);
  pthread_mutex_destroy(&s.stats);
  redlock_manager_free(s.mgr);
}

/* Reentrant locks: the same owner re-enters at once, another owner (and a plain lock) is
 * refused until the last of the owner's leases is released; bad owner ids are refused. */
static void test_reentrant(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 10);
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  redlock_acquire_opts *theirs = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(theirs, 0), REDLOCK_STATUS_OK);
  const uint8_t owner[] = {'j', 'o', 'b', 0, '1'};
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, owner, sizeof owner), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(theirs, (const uint8_t *)"job-2", 5), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(opts, true), REDLOCK_STATUS_OK);
  /* Bad owners: the options keep the owner they had. */
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, owner, 0), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, NULL, 3), REDLOCK_STATUS_NULL_ARGUMENT);
  static uint8_t big[REDLOCK_MAX_OWNER_LEN + 1];
  memset(big, 'x', sizeof big);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, big, sizeof big), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_owner(NULL, owner, sizeof owner), REDLOCK_STATUS_NULL_ARGUMENT);

  const uint8_t res[] = "c-reentrant";
  size_t rlen = sizeof res - 1;
  enum { DEPTH = 10 };
  redlock_lease *held[DEPTH] = {0};
  for (int i = 0; i < DEPTH; i++) {
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, opts, &held[i], err, sizeof err), REDLOCK_STATUS_OK);
  }
  if (!held[DEPTH - 1]) return;
  /* One tenure, one fencing token; each lease its own hold. */
  uint64_t t0 = redlock_lease_fencing_token(held[0]);
  CHECK(t0 > 0);
  for (int i = 1; i < DEPTH; i++) {
    CHECK(redlock_lease_fencing_token(held[i]) == t0);
    CHECK(strcmp(redlock_lease_token(held[i]), redlock_lease_token(held[0])) != 0);
  }
  /* Release out of order; until the last, others are refused. */
  const int order[DEPTH] = {3, 0, 9, 5, 1, 8, 2, 7, 4, 6};
  redlock_lease *other = NULL;
  for (int k = 0; k < DEPTH; k++) {
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, theirs, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_try_lock(mgr, res, rlen, 10000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_unlock(held[order[k]], err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(held[order[k]]);
  }
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, theirs, &other, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(other, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(other);
  /* Without an owner again: not reentrant. */
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, NULL, 0), REDLOCK_STATUS_OK);
  redlock_lease *a = NULL, *b = NULL;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, opts, &a, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, opts, &b, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(redlock_unlock(a, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(a);
  redlock_acquire_opts_free(opts);
  redlock_acquire_opts_free(theirs);
  redlock_manager_free(mgr);
}

/* Who holds a resource, with a label and the empty key prefix. */
static void test_holders(void) {
  char err[512];
  redlock_config *cfg = redlock_config_new();
  for (int i = 0; i < n_urls; i++) CHECK_STATUS(redlock_config_add_node(cfg, urls[i], err, sizeof err), REDLOCK_STATUS_OK);
  /* Generous timeouts, as make_manager's. */
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
  /* Bad labels and prefixes: the config keeps what it had. */
  CHECK_STATUS(redlock_config_set_label(cfg, "a\nb", err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  static char long_label[REDLOCK_MAX_LABEL_LEN + 2];
  memset(long_label, 'x', REDLOCK_MAX_LABEL_LEN + 1);
  CHECK_STATUS(redlock_config_set_label(cfg, long_label, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  static uint8_t long_prefix[REDLOCK_MAX_KEY_PREFIX_LEN + 1];
  CHECK_STATUS(redlock_config_set_key_prefix(cfg, long_prefix, sizeof long_prefix, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_config_set_key_prefix(cfg, NULL, 3, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_label(NULL, "x", err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_label(cfg, "c-test:42", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_key_prefix(cfg, (const uint8_t *)"c-app:", 6, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  if (!mgr) return;

  const uint8_t res[] = "c-holders";
  size_t rlen = sizeof res - 1;
  redlock_holders *h = NULL;
  CHECK_STATUS(redlock_holders_get(mgr, res, rlen, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_holders_get(mgr, res, 0, &h, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_holders_get(NULL, res, rlen, &h, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_holders_get(mgr, res, rlen, &h, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(!redlock_holders_is_locked(h));
  CHECK(redlock_holders_node_count(h) == (size_t)n_urls);
  redlock_holder_info info;
  CHECK_STATUS(redlock_holders_info(h, REDLOCK_HOLDERS_QUORUM, &info, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(info.state == REDLOCK_HOLD_FREE && info.kind == REDLOCK_HOLDER_NONE && info.ttl_ms == -1);
  redlock_holders_free(h);

  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, res, rlen, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  CHECK(strlen(redlock_lease_token(lease)) == 40);
  const char *value = redlock_lease_value(lease);
  CHECK(strncmp(value, redlock_lease_token(lease), 40) == 0 && value[40] == '.');
  CHECK(strstr(value, " c-test:42") != NULL);
  sleep_ms(200);
  h = NULL;
  CHECK_STATUS(redlock_holders_get(mgr, res, rlen, &h, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_holders_is_locked(h));
  CHECK_STATUS(redlock_holders_info(h, REDLOCK_HOLDERS_QUORUM, &info, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(info.state == REDLOCK_HOLD_HELD && info.kind == REDLOCK_HOLDER_LOCK);
  CHECK(info.ttl_ms > 1000 && info.ttl_ms <= 10000);
  CHECK(info.held_for_ms >= 150);
  char label[64];
  CHECK(redlock_holders_label(h, REDLOCK_HOLDERS_QUORUM, label, sizeof label) == 9);
  CHECK(strcmp(label, "c-test:42") == 0);
  /* snprintf-like: cut short, still the whole length. */
  CHECK(redlock_holders_label(h, REDLOCK_HOLDERS_QUORUM, label, 4) == 9 && strcmp(label, "c-t") == 0);
  uint8_t id[128];
  size_t n = redlock_holders_id(h, REDLOCK_HOLDERS_QUORUM, id, sizeof id);
  CHECK(n == strlen(value) && memcmp(id, value, n) == 0);
  CHECK(redlock_holders_id(h, REDLOCK_HOLDERS_QUORUM, NULL, 0) == n);
  /* Node 0 held it too (the quorum answered; give the others their moment). */
  CHECK_STATUS(redlock_holders_info(h, 0, &info, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(info.state == REDLOCK_HOLD_HELD || info.state == REDLOCK_HOLD_FREE);
  CHECK_STATUS(redlock_holders_info(h, (size_t)n_urls, &info, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_holders_info(h, 0, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(redlock_holders_label(h, (size_t)n_urls, label, sizeof label) == 0);
  CHECK(redlock_holders_label(NULL, 0, label, sizeof label) == 0);
  CHECK(redlock_holders_id(NULL, 0, id, sizeof id) == 0);
  CHECK(!redlock_holders_is_locked(NULL));
  CHECK(redlock_holders_node_count(NULL) == 0);
  redlock_holders_free(h);
  redlock_holders_free(NULL);

  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

/* An exclusive acquisition that waits, in its own thread, for shared holders to leave. */
struct exclusive_waiter {
  redlock_manager *mgr;
  redlock_acquire_opts *opts;
  const uint8_t *res;
  size_t rlen;
  redlock_status status;
  redlock_lease *lease;
  volatile int finished;
  struct timespec done;
};

static void *wait_exclusive(void *arg) {
  struct exclusive_waiter *w = arg;
  char err[512];
  w->status = redlock_acquire(w->mgr, w->res, w->rlen, 10000, w->opts, &w->lease, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &w->done);
  __atomic_store_n(&w->finished, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Shared (read) locks: many holders together, an exclusive lock refused while any holds (and
 * shared ones refused while it holds), a waiting exclusive locker granted only after the last
 * shared unlock, and shared with an owner refused. */
static void test_shared(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 10);
  redlock_manager *writer = make_manager(0, 100);
  const uint8_t res[] = "c-shared";
  size_t rlen = sizeof res - 1;
  redlock_acquire_opts *sh = redlock_acquire_opts_new();
  redlock_acquire_opts *ex = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_shared(NULL, true), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_shared(sh, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(sh, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_shared(ex, false), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(ex, 0), REDLOCK_STATUS_OK);

  /* Four shared holders from one manager, at once. */
  enum { READERS = 4 };
  redlock_lease *readers[READERS] = {0};
  for (int i = 0; i < READERS; i++) {
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    if (!readers[i]) return;
    CHECK(redlock_lease_is_shared(readers[i]));
    CHECK(redlock_lease_is_valid(readers[i]));
    CHECK(redlock_lease_resource_count(readers[i]) == 1);
    size_t len = 0;
    const uint8_t *got = redlock_lease_resource_at(readers[i], 0, &len);
    CHECK(got != NULL && len == rlen && memcmp(got, res, len) == 0);
    for (int j = 0; j < i; j++) CHECK(strcmp(redlock_lease_token(readers[i]), redlock_lease_token(readers[j])) != 0);
  }
  CHECK_STATUS(redlock_extend(readers[0], 15000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_validity_ms(readers[0]) > 13000); /* less the drift and a slow step */
  /* Who holds it: the shared holders' hash. */
  redlock_holders *h = NULL;
  CHECK_STATUS(redlock_holders_get(mgr, res, rlen, &h, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_holder_info info;
  CHECK_STATUS(redlock_holders_info(h, REDLOCK_HOLDERS_QUORUM, &info, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(info.state == REDLOCK_HOLD_HELD && info.kind == REDLOCK_HOLDER_SHARED);
  redlock_holders_free(h);
  /* Exclusive tries are refused until every shared holder has unlocked, then granted. */
  redlock_lease *x = (redlock_lease *)0x1;
  for (int i = 0; i < READERS; i++) {
    CHECK_STATUS(redlock_try_lock(writer, res, rlen, 10000, &x, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_acquire(writer, res, rlen, 10000, ex, &x, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK(x == (redlock_lease *)0x1);
    CHECK_STATUS(redlock_unlock(readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    CHECK(!redlock_lease_is_valid(readers[i]));
    redlock_lease_free(readers[i]);
    readers[i] = NULL;
  }
  x = NULL;
  CHECK_STATUS(redlock_try_lock(writer, res, rlen, 10000, &x, err, sizeof err), REDLOCK_STATUS_OK);
  if (!x) return;
  CHECK(!redlock_lease_is_shared(x));
  /* Held exclusively: a shared acquisition is refused. */
  redlock_lease *r = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(r == (redlock_lease *)0x1);
  CHECK_STATUS(redlock_unlock(x, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(x);

  /* A waiting exclusive locker in another thread gets the lock only after the last shared
   * unlock; while it waits, new shared acquisitions queue behind it (writer preference). */
  for (int i = 0; i < READERS; i++) {
    readers[i] = NULL;
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    if (!readers[i]) return;
  }
  redlock_acquire_opts *ex_wait = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(ex_wait, 20000), REDLOCK_STATUS_OK);
  struct exclusive_waiter w = {writer, ex_wait, res, rlen, REDLOCK_STATUS_INTERNAL, NULL, 0, {0, 0}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_exclusive, &w) == 0);
  sleep_ms(300);
  CHECK(!__atomic_load_n(&w.finished, __ATOMIC_SEQ_CST));
  r = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(r == (redlock_lease *)0x1);
  for (int i = 0; i < READERS - 1; i++) {
    CHECK_STATUS(redlock_unlock(readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(readers[i]);
    sleep_ms(150);
    CHECK(!__atomic_load_n(&w.finished, __ATOMIC_SEQ_CST));
  }
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(readers[READERS - 1], err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(readers[READERS - 1]);
  pthread_join(t, NULL);
  long gap = (w.done.tv_sec - released.tv_sec) * 1000 + (w.done.tv_nsec - released.tv_nsec) / 1000000;
  printf("exclusive waiter granted %ld ms after the last shared unlock\n", gap);
  CHECK_STATUS(w.status, REDLOCK_STATUS_OK);
  CHECK(gap >= 0 && gap < 3000);
  if (w.lease) {
    CHECK(!redlock_lease_is_shared(w.lease));
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(w.lease);
  }
  /* The intent went with the writer: shared holders are let in again. */
  r = NULL;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(r, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(r);

  /* Shared with an owner: refused at acquire, nothing sent. */
  CHECK_STATUS(redlock_acquire_opts_set_owner(sh, (const uint8_t *)"job-1", 5), REDLOCK_STATUS_OK);
  r = (redlock_lease *)0x1;
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "shared") != NULL && strstr(err, "owner") != NULL);
  CHECK(r == (redlock_lease *)0x1);
  /* Without the owner again it works; shared false makes it exclusive. */
  CHECK_STATUS(redlock_acquire_opts_set_owner(sh, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_shared(sh, false), REDLOCK_STATUS_OK);
  r = NULL;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(!redlock_lease_is_shared(r));
  CHECK_STATUS(redlock_unlock(r, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(r);
  redlock_acquire_opts_free(ex_wait);
  redlock_acquire_opts_free(ex);
  redlock_acquire_opts_free(sh);
  redlock_manager_free(writer);
  redlock_manager_free(mgr);
}

/* REDLOCK_MAX_RESOURCES + 1 distinct resource names, for redlock_acquire_many. */
static uint8_t many_names[REDLOCK_MAX_RESOURCES + 1][16];
static const uint8_t *many[REDLOCK_MAX_RESOURCES + 1];
static size_t many_lens[REDLOCK_MAX_RESOURCES + 1];

static void fill_many(const char *prefix) {
  for (size_t i = 0; i <= REDLOCK_MAX_RESOURCES; i++) {
    many_lens[i] = (size_t)snprintf((char *)many_names[i], sizeof many_names[i], "%s%zu", prefix, i);
    many[i] = many_names[i];
  }
}

/* redlock_acquire_many: all or nothing, one lease for the set. */
static void test_acquire_many(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 10);
  const uint8_t a[] = "c-many-a", b[] = {'c', '-', 'm', 0, '\n', 'b'}, c[] = "c-many-c", d[] = "c-many-d";
  const uint8_t *res[] = {a, b, c};
  const size_t lens[] = {sizeof a - 1, sizeof b, sizeof c - 1};
  enum { N = sizeof res / sizeof *res };
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, N, 10000, NULL, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  CHECK(!redlock_lease_is_shared(lease));
  CHECK(redlock_lease_validity_ms(lease) > 9000);
  CHECK(strlen(redlock_lease_token(lease)) == 40);
  CHECK(redlock_lease_resource_count(lease) == N);
  for (size_t i = 0; i < N; i++) {
    size_t len = 0;
    const uint8_t *got = redlock_lease_resource_at(lease, i, &len);
    CHECK(got != NULL && len == lens[i] && memcmp(got, res[i], len) == 0);
    CHECK(redlock_lease_resource_at(lease, i, NULL) == got);
  }
  size_t len = 77;
  CHECK(redlock_lease_resource_at(lease, N, &len) == NULL && len == 77);
  CHECK(redlock_lease_resource_at(lease, SIZE_MAX, &len) == NULL && len == 77);
  const uint8_t *first = redlock_lease_resource(lease, &len);
  CHECK(first != NULL && len == lens[0] && memcmp(first, a, len) == 0);

  /* Each resource is held: plain and shared tries of any one are refused. */
  redlock_acquire_opts *sh = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_shared(sh, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(sh, 0), REDLOCK_STATUS_OK);
  redlock_lease *other = (redlock_lease *)0x1;
  for (size_t i = 0; i < N; i++) {
    CHECK_STATUS(redlock_try_lock(mgr, res[i], lens[i], 10000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
    CHECK_STATUS(redlock_acquire(mgr, res[i], lens[i], 10000, sh, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  }
  /* An overlapping set is refused and leaves nothing behind: d is still free. */
  redlock_acquire_opts *once = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(once, 0), REDLOCK_STATUS_OK);
  const uint8_t *overlap[] = {d, c};
  const size_t overlap_lens[] = {sizeof d - 1, sizeof c - 1};
  CHECK_STATUS(redlock_acquire_many(mgr, overlap, overlap_lens, 2, 10000, once, &other, err, sizeof err),
               REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  redlock_lease *dl = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, d, sizeof d - 1, 10000, &dl, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(dl, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(dl);

  /* Extend and unlock act on the whole set. */
  CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_validity_ms(lease) > 19000);
  CHECK(redlock_lease_ttl_ms(lease) == 20000);
  CHECK_STATUS(redlock_try_lock(mgr, c, sizeof c - 1, 10000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(!redlock_lease_is_valid(lease));
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  /* The list outlives the hold. */
  CHECK(redlock_lease_resource_count(lease) == N);
  redlock_lease_free(lease);
  CHECK(other == (redlock_lease *)0x1);
  for (size_t i = 0; i < N; i++) {
    other = NULL;
    CHECK_STATUS(redlock_try_lock(mgr, res[i], lens[i], 10000, &other, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(other, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(other);
  }

  /* All or nothing the other way: one member held plainly refuses the set, which takes
   * nothing; then it is granted with options (no wait) once the member is free. */
  redlock_lease *held = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, b, sizeof b, 10000, &held, err, sizeof err), REDLOCK_STATUS_OK);
  lease = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, N, 10000, once, &lease, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(lease == (redlock_lease *)0x1);
  other = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, a, sizeof a - 1, 10000, &other, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(other, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(other);
  CHECK_STATUS(redlock_unlock(held, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(held);
  lease = NULL;
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, N, 10000, once, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);

  /* REDLOCK_MAX_RESOURCES at once is allowed. */
  fill_many("c-max-");
  lease = NULL;
  CHECK_STATUS(redlock_acquire_many(mgr, many, many_lens, REDLOCK_MAX_RESOURCES, 10000, NULL, &lease, err, sizeof err),
               REDLOCK_STATUS_OK);
  CHECK(redlock_lease_resource_count(lease) == REDLOCK_MAX_RESOURCES);
  CHECK(redlock_lease_resource_at(lease, REDLOCK_MAX_RESOURCES - 1, &len) != NULL && len == many_lens[REDLOCK_MAX_RESOURCES - 1]);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);

  redlock_acquire_opts_free(once);
  redlock_acquire_opts_free(sh);
  redlock_manager_free(mgr);
}

/* redlock_acquire_many refuses bad input with a status and a message, sends nothing, and
 * leaves *out untouched. */
#define CHECK_MANY_REFUSED(mgr, res, lens, count, opts, want, needle)                                       \
  do {                                                                                                      \
    redlock_lease *out_ = (redlock_lease *)0x1;                                                             \
    char e_[512] = "";                                                                                      \
    CHECK_STATUS(redlock_acquire_many(mgr, res, lens, count, 10000, opts, &out_, e_, sizeof e_), want);      \
    CHECK(e_[0] != '\0' && strstr(e_, needle) != NULL);                                                     \
    if (e_[0] == '\0' || strstr(e_, needle) == NULL) fprintf(stderr, "  message: \"%s\"\n", e_);           \
    CHECK(out_ == (redlock_lease *)0x1);                                                                    \
  } while (0)

static void test_acquire_many_bad_input(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 10);
  const uint8_t a[] = "c-bad-a", b[] = "c-bad-b";
  const uint8_t *res[] = {a, b, a};
  const size_t lens[] = {sizeof a - 1, sizeof b - 1, sizeof a - 1};

  CHECK_MANY_REFUSED(mgr, res, lens, 0, NULL, REDLOCK_STATUS_INVALID_ARGUMENT, "at least one");
  CHECK_MANY_REFUSED(mgr, NULL, NULL, 0, NULL, REDLOCK_STATUS_INVALID_ARGUMENT, "at least one");
  CHECK_MANY_REFUSED(mgr, res, lens, 3, NULL, REDLOCK_STATUS_INVALID_ARGUMENT, "resource 2");
  CHECK_MANY_REFUSED(mgr, NULL, lens, 2, NULL, REDLOCK_STATUS_NULL_ARGUMENT, "resources");
  CHECK_MANY_REFUSED(mgr, res, NULL, 2, NULL, REDLOCK_STATUS_NULL_ARGUMENT, "resource_lens");
  CHECK_MANY_REFUSED(mgr, NULL, NULL, 2, NULL, REDLOCK_STATUS_NULL_ARGUMENT, "resources");
  /* A NULL resource with a length, and the empty name. */
  const uint8_t *with_null[] = {a, NULL};
  CHECK_MANY_REFUSED(mgr, with_null, lens, 2, NULL, REDLOCK_STATUS_NULL_ARGUMENT, "resource");
  const size_t empty_lens[] = {sizeof a - 1, 0};
  CHECK_MANY_REFUSED(mgr, res, empty_lens, 2, NULL, REDLOCK_STATUS_INVALID_ARGUMENT, "resource 1");
  /* One more than REDLOCK_MAX_RESOURCES, each a different name. */
  fill_many("c-over-");
  CHECK_MANY_REFUSED(mgr, many, many_lens, REDLOCK_MAX_RESOURCES + 1, NULL, REDLOCK_STATUS_INVALID_ARGUMENT, "limit");
  /* Options it does not take: shared, owner, fenced. */
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_shared(opts, true), REDLOCK_STATUS_OK);
  CHECK_MANY_REFUSED(mgr, res, lens, 2, opts, REDLOCK_STATUS_INVALID_ARGUMENT, "shared");
  CHECK_STATUS(redlock_acquire_opts_set_shared(opts, false), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, (const uint8_t *)"job-1", 5), REDLOCK_STATUS_OK);
  CHECK_MANY_REFUSED(mgr, res, lens, 2, opts, REDLOCK_STATUS_INVALID_ARGUMENT, "owner");
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(opts, true), REDLOCK_STATUS_OK);
  CHECK_MANY_REFUSED(mgr, res, lens, 2, opts, REDLOCK_STATUS_INVALID_ARGUMENT, "fenced");
  /* A bad TTL, a NULL manager, a NULL out. */
  redlock_lease *lease = (redlock_lease *)0x1;
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, 2, 0, NULL, &lease, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "TTL") != NULL);
  CHECK_MANY_REFUSED(NULL, res, lens, 2, NULL, REDLOCK_STATUS_NULL_ARGUMENT, "mgr");
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, 2, 10000, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "out") != NULL);
  CHECK(lease == (redlock_lease *)0x1);

  /* Nothing was taken: both are free. */
  for (int i = 0; i < 2; i++) {
    lease = NULL;
    CHECK_STATUS(redlock_try_lock(mgr, res[i], lens[i], 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_acquire_opts_free(opts);
  redlock_manager_free(mgr);
}

/* The counting semaphore: P permits on distinct slots and no more, the permit count checked,
 * a waiter woken by a release, a fenced permit extended, and bad input refused. */
static const uint8_t SEM[] = "c-sem";

static void *wait_for_permit(void *arg) {
  struct waiter *w = arg;
  char err[512];
  w->status = redlock_semaphore_acquire(w->mgr, SEM, sizeof SEM - 1, 2, 10000, w->opts, &w->lease, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &w->done);
  return NULL;
}

static void test_semaphore(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 5000);
  redlock_lease *a = NULL, *b = NULL, *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 30000, NULL, &a, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 30000, NULL, &b, err, sizeof err), REDLOCK_STATUS_OK);
  if (!a || !b) return;
  uint32_t sa = 99, sb = 99, p = 0;
  CHECK(redlock_lease_permit(a, &sa, &p) && p == 2);
  CHECK(redlock_lease_permit(b, &sb, NULL));
  CHECK(redlock_lease_permit(b, NULL, NULL));
  CHECK(sa < 2 && sb < 2 && sa != sb);
  CHECK(redlock_lease_validity_ms(a) > 25000);
  size_t len = 0;
  const uint8_t *name = redlock_lease_resource(a, &len);
  CHECK(name != NULL && len == sizeof SEM - 1 && memcmp(name, SEM, len) == 0);
  /* Full: refused (no wait), nothing handed out. */
  redlock_acquire_opts *once = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(once, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 30000, once, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  /* Another count while permits are held: INVALID_ARGUMENT naming the recorded one. */
  err[0] = '\0';
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 3, 30000, once, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "has 2 permits") != NULL);
  CHECK(other == (redlock_lease *)0x1);
  /* A lock of the same name is independent, and is not a permit. */
  redlock_lease *plain = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, SEM, sizeof SEM - 1, 10000, &plain, err, sizeof err), REDLOCK_STATUS_OK);
  sa = 77;
  CHECK(!redlock_lease_permit(plain, &sa, &p) && sa == 77);
  CHECK(!redlock_lease_permit(NULL, &sa, &p) && sa == 77);
  CHECK_STATUS(redlock_unlock(plain, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(plain);

  /* A waiter (retry delay 5 s: only a release wakes it this soon) gets b's slot. */
  redlock_manager *waiter_mgr = make_manager(0, 5000);
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 20000), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(opts, true), REDLOCK_STATUS_OK);
  struct waiter w = {waiter_mgr, opts, REDLOCK_STATUS_OK, NULL, {0, 0}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_for_permit, &w) == 0);
  sleep_ms(300);
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(b, err, sizeof err), REDLOCK_STATUS_OK);
  pthread_join(t, NULL);
  long gap = (w.done.tv_sec - released.tv_sec) * 1000 + (w.done.tv_nsec - released.tv_nsec) / 1000000;
  printf("semaphore waiter granted %ld ms after the release\n", gap);
  CHECK_STATUS(w.status, REDLOCK_STATUS_OK);
  CHECK(gap < 4000);
  if (w.lease) {
    uint32_t sw = 99;
    CHECK(redlock_lease_permit(w.lease, &sw, &p) && sw == sb && p == 2);
    CHECK(redlock_lease_fencing_token(w.lease) > 0);
    CHECK_STATUS(redlock_extend(w.lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK(redlock_lease_ttl_ms(w.lease) == 20000);
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
    redlock_lease_free(w.lease);
  }
  CHECK_STATUS(redlock_unlock(a, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(a);
  redlock_lease_free(b);
  /* None held: a new count applies. */
  redlock_lease *c = NULL;
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 3, 30000, once, &c, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_permit(c, NULL, &p) && p == 3);
  CHECK_STATUS(redlock_unlock(c, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(c);

  /* Bad input: nothing sent, *out untouched. */
  struct { uint32_t permits; const uint8_t *name; size_t len; uint32_t ttl; redlock_status want; const char *says; } bad[] = {
      {0, SEM, sizeof SEM - 1, 1000, REDLOCK_STATUS_INVALID_ARGUMENT, "permits"},
      {REDLOCK_MAX_PERMITS + 1, SEM, sizeof SEM - 1, 1000, REDLOCK_STATUS_INVALID_ARGUMENT, "permits"},
      {2, SEM, 0, 1000, REDLOCK_STATUS_INVALID_ARGUMENT, "empty"},
      {2, NULL, 3, 1000, REDLOCK_STATUS_NULL_ARGUMENT, "name"},
      {2, SEM, sizeof SEM - 1, 0, REDLOCK_STATUS_INVALID_ARGUMENT, "TTL"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    other = (redlock_lease *)0x1;
    CHECK_STATUS(redlock_semaphore_acquire(mgr, bad[i].name, bad[i].len, bad[i].permits, bad[i].ttl, NULL, &other, err, sizeof err), bad[i].want);
    if (strstr(err, bad[i].says) == NULL) fprintf(stderr, "bad input %zu: %s\n", i, err);
    CHECK(strstr(err, bad[i].says) != NULL);
    CHECK(other == (redlock_lease *)0x1);
  }
  redlock_acquire_opts *owned = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_owner(owned, (const uint8_t *)"job-1", 5), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 1000, owned, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "owner") != NULL);
  CHECK_STATUS(redlock_acquire_opts_set_owner(owned, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_shared(owned, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 1000, owned, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "shared") != NULL);
  CHECK_STATUS(redlock_semaphore_acquire(mgr, SEM, sizeof SEM - 1, 2, 1000, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(err, "out") != NULL);
  CHECK_STATUS(redlock_semaphore_acquire(NULL, SEM, sizeof SEM - 1, 2, 1000, NULL, &other, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(other == (redlock_lease *)0x1);
  redlock_acquire_opts_free(owned);
  redlock_acquire_opts_free(opts);
  redlock_acquire_opts_free(once);
  redlock_manager_free(waiter_mgr);
  redlock_manager_free(mgr);
}

/* ---- The fair lock ---- */

/* HLEN of `key` on the node at `url` ("redis://host:port" or "host:port"), over a connection
 * of its own that bypasses the library; -1 on any failure. */
static long long node_hlen(const char *url, const char *key) {
  const char *hp = strstr(url, "://");
  hp = hp ? hp + 3 : url;
  const char *colon = strrchr(hp, ':');
  if (!colon) return -1;
  char host[64], port[16];
  size_t hl = (size_t)(colon - hp);
  if (hl == 0 || hl >= sizeof host) return -1;
  memcpy(host, hp, hl);
  host[hl] = '\0';
  snprintf(port, sizeof port, "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) return -1;
  long long n = -1;
  int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd >= 0) {
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      char cmd[256], reply[64];
      int len = snprintf(cmd, sizeof cmd, "*2\r\n$4\r\nHLEN\r\n$%zu\r\n%s\r\n", strlen(key), key);
      size_t got = 0;
      if (len > 0 && (size_t)len < sizeof cmd && send(fd, cmd, (size_t)len, 0) == len) {
        /* The reply is one line, ":<n>\r\n". */
        while (got < sizeof reply - 1) {
          ssize_t r = recv(fd, reply + got, sizeof reply - 1 - got, 0);
          if (r <= 0) break;
          got += (size_t)r;
          if (got >= 2 && reply[got - 2] == '\r' && reply[got - 1] == '\n') break;
        }
        reply[got] = '\0';
        if (got >= 4 && reply[0] == ':') n = strtoll(reply + 1, NULL, 10);
      }
    }
    close(fd);
  }
  freeaddrinfo(ai);
  return n;
}

/* On how many nodes the queue `key` holds at least `n` waiters. */
static int nodes_queued(const char *key, long long n) {
  int on = 0;
  for (int i = 0; i < n_urls; i++)
    if (node_hlen(urls[i], key) >= n) on++;
  return on;
}

/* Waits (at most 20 s) until at least `n` waiters are queued on a majority of the nodes: the
 * last of them has finished queueing, so whoever queues next gets a larger ticket. */
static int wait_queued(const char *key, long long n) {
  for (int i = 0; i < 2000; i++) {
    if (nodes_queued(key, n) >= n_urls / 2 + 1) return 1;
    sleep_ms(10);
  }
  return 0;
}

/* Waits (at most 10 s) until no node has the queue `key` (every entry left with its waiter). */
static int wait_queue_gone(const char *key) {
  for (int i = 0; i < 1000; i++) {
    int left = 0;
    for (int j = 0; j < n_urls; j++)
      if (node_hlen(urls[j], key) != 0) left++;
    if (left == 0) return 1;
    sleep_ms(10);
  }
  return 0;
}

static const uint8_t FAIR[] = "c-fair";
static const char FAIR_QUEUE[] = "redlock-fair:redlock:c-fair";

struct fair_waiter {
  redlock_manager *mgr;
  const redlock_acquire_opts *opts;
  int *next; /* the grant counter the waiters share */
  redlock_status status;
  int order; /* the how-manyth grant this waiter's was, from 0; -1 if none */
  bool has_ticket;
  uint64_t ticket;
  volatile int finished;
  struct timespec granted;
};

/* A fair waiter: waits for the lock, records the order of its grant and its ticket, holds the
 * lock briefly and releases it, which wakes the next waiter. */
static void *fair_wait(void *arg) {
  struct fair_waiter *w = arg;
  char err[512];
  redlock_lease *lease = NULL;
  w->status = redlock_acquire(w->mgr, FAIR, sizeof FAIR - 1, 10000, w->opts, &lease, err, sizeof err);
  if (w->status == REDLOCK_STATUS_OK) {
    clock_gettime(CLOCK_MONOTONIC, &w->granted);
    w->order = __atomic_fetch_add(w->next, 1, __ATOMIC_SEQ_CST);
    w->has_ticket = redlock_lease_ticket(lease, &w->ticket);
    sleep_ms(5);
    redlock_status st = redlock_unlock(lease, err, sizeof err);
    if (st != REDLOCK_STATUS_OK) {
      fprintf(stderr, "fair waiter unlock: %s\n", err);
      w->status = st;
    }
    redlock_lease_free(lease);
  } else {
    fprintf(stderr, "fair waiter: %s\n", err);
  }
  __atomic_store_n(&w->finished, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* The fair lock: granted at once without a ticket when nobody is queued; waiters queued one
 * after another granted in queue order, each with a larger ticket, a release waking the next;
 * a waiter that gives up leaving the queue; bad input refused. */
static void test_fair(void) {
  char err[512];
  /* Retry delay 5 s, drop-out time 60 s (a waiter refreshes its place every 12 s): a waiter
   * granted within seconds of a release was woken by it. */
  redlock_manager *mgr = make_manager(0, 5000);
  redlock_acquire_opts *once = redlock_acquire_opts_new();
  redlock_acquire_opts *waits = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(once, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(once, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fair(waits, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(waits, 30000), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(waits, 60000), REDLOCK_STATUS_OK);

  /* Nobody queued: granted at once, with no ticket. */
  redlock_lease *holder = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 30000, once, &holder, err, sizeof err), REDLOCK_STATUS_OK);
  if (!holder) return;
  uint64_t ticket = 77;
  CHECK(!redlock_lease_ticket(holder, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(holder, NULL));
  CHECK(redlock_lease_is_valid(holder));
  /* Held: a plain try and a fair try are refused, and the fair try queues nothing. */
  redlock_lease *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, FAIR, sizeof FAIR - 1, 1000, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, once, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK(nodes_queued(FAIR_QUEUE, 1) == 0);

  /* A waiter that gives up (its wait runs out) leaves the queue. */
  redlock_acquire_opts *short_wait = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(short_wait, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(short_wait, 300), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, short_wait, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK(wait_queue_gone(FAIR_QUEUE));
  redlock_acquire_opts_free(short_wait);

  /* Waiters queued one after another (each started once the one before has queued on a
   * majority) are granted in that order once the holder releases, each with a ticket larger
   * than the one before's. */
  enum { WAITERS = 4 };
  int next = 0;
  struct fair_waiter w[WAITERS];
  pthread_t t[WAITERS];
  int started = 0;
  for (int i = 0; i < WAITERS; i++) {
    w[i] = (struct fair_waiter){mgr, waits, &next, REDLOCK_STATUS_INTERNAL, -1, false, 0, 0, {0, 0}};
    if (pthread_create(&t[i], NULL, fair_wait, &w[i]) != 0) break;
    started++;
    int queued = wait_queued(FAIR_QUEUE, i + 1);
    if (!queued) fprintf(stderr, "fair waiter %d never queued on a majority\n", i);
    CHECK(queued);
  }
  CHECK(started == WAITERS);
  for (int i = 0; i < started; i++) CHECK(!__atomic_load_n(&w[i].finished, __ATOMIC_SEQ_CST));
  struct timespec released;
  clock_gettime(CLOCK_MONOTONIC, &released);
  CHECK_STATUS(redlock_unlock(holder, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(holder);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  long last = 0;
  for (int i = 0; i < started; i++) {
    CHECK_STATUS(w[i].status, REDLOCK_STATUS_OK);
    if (w[i].order != i) fprintf(stderr, "fair waiter %d was granted the lock %d-th\n", i, w[i].order);
    CHECK(w[i].order == i);
    CHECK(w[i].has_ticket);
    if (i > 0) CHECK(w[i].ticket > w[i - 1].ticket);
    long at = (w[i].granted.tv_sec - released.tv_sec) * 1000 + (w[i].granted.tv_nsec - released.tv_nsec) / 1000000;
    if (at > last) last = at;
  }
  printf("%d fair waiters granted in queue order, the last %ld ms after the release\n", started, last);
  /* Each was woken by the release before it: without the wake-ups, each would wait for its
   * next refresh (12 s). */
  CHECK(last < 10000);
  /* Every entry left the queues with its waiter. */
  CHECK(wait_queue_gone(FAIR_QUEUE));

  /* A fair lock with a fencing token; a plain lease has no ticket. */
  redlock_acquire_opts *fenced = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_fair(fenced, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_fenced(fenced, true), REDLOCK_STATUS_OK);
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 10000, fenced, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(redlock_lease_fencing_token(lease) > 0);
    CHECK(!redlock_lease_ticket(lease, &ticket) && ticket == 77);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_acquire_opts_free(fenced);
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, FAIR, sizeof FAIR - 1, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, &ticket) && ticket == 77);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }

  /* Bad input. The setters: NULL options, an invalid handle, a drop-out time out of range
   * (the options unchanged). */
  static uint64_t zeros[512]; /* a forged handle, as in test_invalid_handles */
  CHECK_STATUS(redlock_acquire_opts_set_fair(NULL, true), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(NULL, 1000), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_fair((redlock_acquire_opts *)zeros, true), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms((redlock_acquire_opts *)zeros, 1000), REDLOCK_STATUS_INVALID_HANDLE);
  CHECK(!redlock_lease_ticket((const redlock_lease *)zeros, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(NULL, &ticket) && ticket == 77);
  CHECK(!redlock_lease_ticket(NULL, NULL));
  redlock_acquire_opts *bad = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MIN_DROP_OUT_MS - 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MAX_DROP_OUT_MS + 1), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, UINT32_MAX), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(REDLOCK_MIN_DROP_OUT_MS <= REDLOCK_DEFAULT_DROP_OUT_MS && REDLOCK_DEFAULT_DROP_OUT_MS <= REDLOCK_MAX_DROP_OUT_MS);
  /* Refused settings left the options as they were: a plain lock is granted. */
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, NULL));
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  /* A drop-out time without fair: refused at the acquisition, nothing sent, *out untouched. */
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MIN_DROP_OUT_MS), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, REDLOCK_MAX_DROP_OUT_MS), REDLOCK_STATUS_OK);
  other = (redlock_lease *)0x1;
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "drop-out") != NULL && strstr(err, "fair") != NULL);
  CHECK(other == (redlock_lease *)0x1);
  /* 0 is the default again: a plain lock is granted. */
  CHECK_STATUS(redlock_acquire_opts_set_drop_out_ms(bad, 0), REDLOCK_STATUS_OK);
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  /* Fair with an owner, or shared: refused at the acquisition. */
  CHECK_STATUS(redlock_acquire_opts_set_fair(bad, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(bad, (const uint8_t *)"job-1", 5), REDLOCK_STATUS_OK);
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL && strstr(err, "reentrant") != NULL);
  CHECK_STATUS(redlock_acquire_opts_set_owner(bad, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_shared(bad, true), REDLOCK_STATUS_OK);
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL && strstr(err, "shared") != NULL);
  CHECK_STATUS(redlock_acquire_opts_set_shared(bad, false), REDLOCK_STATUS_OK);
  /* Fair for a set or a semaphore's permit: refused. */
  const uint8_t *set[] = {(const uint8_t *)"c-fair-a", (const uint8_t *)"c-fair-b"};
  size_t set_lens[] = {8, 8};
  err[0] = '\0';
  CHECK_STATUS(redlock_acquire_many(mgr, set, set_lens, 2, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL);
  err[0] = '\0';
  CHECK_STATUS(redlock_semaphore_acquire(mgr, FAIR, sizeof FAIR - 1, 2, 1000, bad, &other, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "fair") != NULL);
  CHECK(other == (redlock_lease *)0x1);
  /* Fair and valid again: granted (nothing was left by the refusals), no ticket. */
  lease = NULL;
  CHECK_STATUS(redlock_acquire(mgr, FAIR, sizeof FAIR - 1, 1000, bad, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (lease) {
    CHECK(!redlock_lease_ticket(lease, NULL));
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  CHECK(nodes_queued(FAIR_QUEUE, 1) == 0);
  redlock_acquire_opts_free(bad);
  redlock_acquire_opts_free(waits);
  redlock_acquire_opts_free(once);
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s redis://127.0.0.1:PORT ...\n", argv[0]);
    return 2;
  }
  urls = (const char **)(argv + 1);
  n_urls = argc - 1;
  test_status_strings();
  test_null_arguments();
  test_invalid_handles();
  test_bad_input();
  test_lock_unlock_extend();
  test_expiry();
  test_free_orders();
  test_auto_renew();
  test_fencing_and_accessors();
  test_quarantine();
  test_metrics();
  test_auth_failure();
  test_wait_and_cancel();
  test_reentrant();
  test_holders();
  test_shared();
  test_acquire_many();
  test_acquire_many_bad_input();
  test_semaphore();
  test_fair();
  test_contention();
  printf("%d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
