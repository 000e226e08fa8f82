/* Plain locks: lock, unlock, extend and expiry, the order of frees, reentrant locks, who
 * holds a resource, the metrics text, and many threads contending for one lock.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

static void test_lock_unlock_extend(void) {
  char err[512];
  redlock_manager *mgr = make_manager(3, 50);
  CHECK(redlock_manager_node_count(mgr) == (size_t)n_urls);
  CHECK(redlock_manager_quorum(mgr) == (size_t)n_urls / 2 + 1);

  /* A resource with a NUL, CR and LF in it. */
  const uint8_t res[] = {'c', 0, '\r', '\n', 0xff};
  redlock_lease *lease = NULL;
  struct timespec began = mono_now();
  CHECK_STATUS(redlock_lock(mgr, res, sizeof res, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(lease != NULL);
  if (!lease) return;
  /* The TTL less the drift (1 %) and the time since the step began (measured: a busy machine
   * under valgrind may take a second or more). */
  CHECK(fresh_validity(redlock_lease_validity_ms(lease), 10000, &began));
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

  began = mono_now();
  CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(fresh_validity(redlock_lease_validity_ms(lease), 20000, &began));
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

/* A lock left to expire. Its TTL (2 s) leaves a first step on a new manager under valgrind
 * (connections, handshakes) time to finish within it; the wait is measured from before the
 * step: by `began + TTL` the validity is over, and by `began + took + TTL` (+ a margin) every
 * node has dropped the key, which was set by then. */
static void test_expiry(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  redlock_lease *lease = NULL;
  struct timespec began = mono_now();
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"exp", 3, 2000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  long took = ms_since(&began);
  if (!lease) return;
  while (ms_since(&began) < 2000 + took + 150) sleep_ms(20);
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

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_lock_unlock_extend();
  test_expiry();
  test_free_orders();
  test_metrics();
  test_reentrant();
  test_holders();
  test_contention();
  return harness_finish();
}
