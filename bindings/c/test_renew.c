/* Automatic renewal and lost leases, fencing tokens and the lease's accessors, and the
 * restart quarantine with its maximum TTL.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

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

/* A 64-bit hold bound: UINT64_MAX holds for as long as the lease lives (past the clock's
 * range, it is no bound); here three extensions end it, and the reason says so. (A TTL of
 * 3 s: a renewal late by most of two seconds, as on a busy machine under valgrind, is no
 * loss, which would give another reason.) */
static void test_auto_renew64(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  CHECK_STATUS(redlock_lease_auto_renew64(NULL, UINT64_MAX, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  struct lost_note far = {0, 0, 99, 0};
  redlock_lease *lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"far", 3, 3000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) {
    redlock_manager_free(mgr);
    return;
  }
  CHECK_STATUS(redlock_lease_auto_renew64(lease, UINT64_MAX, 3, on_lost, &far, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_wait_lost(lease, 30000));
  char why[256] = "";
  redlock_lease_lost_reason(lease, why, sizeof why);
  if (strstr(why, "maximum of 3 extensions reached") == NULL) fprintf(stderr, "lost: %s\n", why);
  CHECK(strstr(why, "maximum of 3 extensions reached") != NULL);
  for (int i = 0; i < 1000 && far.calls == 0; i++) sleep_ms(10);
  CHECK(far.calls == 1 && far.was_lost);
  redlock_lease_free(lease);
  redlock_manager_free(mgr);
}

static void test_auto_renew(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 0);
  CHECK_STATUS(redlock_lease_auto_renew(NULL, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(!redlock_lease_is_lost(NULL));
  CHECK(!redlock_lease_wait_lost(NULL, 0));
  redlock_lease_stop_renewal(NULL);

  /* A 3 s lock renewed for 6 s: valid throughout, then lost at the bound. (A TTL of 3 s: a
   * renewal late by most of two seconds, as on a busy machine under valgrind, is no loss.)
   * Each check counts only if it was made before the bound (from before the acquisition):
   * sleeps that a busy machine stretches must not carry a check past it. */
  struct lost_note note = {0, 0, 99, 0};
  redlock_lease *lease = NULL;
  struct timespec acquiring;
  clock_gettime(CLOCK_MONOTONIC, &acquiring);
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"renewed", 7, 3000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  CHECK_STATUS(redlock_lease_auto_renew(lease, 6000, 0, on_lost, &note, err, sizeof err), REDLOCK_STATUS_OK);
  int checked = 0;
  while (ms_since(&acquiring) < 5000) {
    sleep_ms(100);
    uint32_t valid = redlock_lease_validity_ms(lease);
    bool lost = redlock_lease_is_lost(lease);
    if (ms_since(&acquiring) >= 6000) break; /* the bound may have come meanwhile */
    CHECK(valid > 0 && !lost);
    checked++;
  }
  CHECK(checked > 0);
  CHECK(redlock_lease_wait_lost(lease, 30000));
  CHECK(redlock_lease_is_lost(lease));
  CHECK(redlock_lease_validity_ms(lease) == 0);
  for (int i = 0; i < 1000 && note.calls == 0; i++) sleep_ms(10);
  CHECK(note.calls == 1 && note.was_lost && note.validity == 0);
  CHECK_STATUS(redlock_extend(lease, 1000, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  redlock_lease_free(lease);

  /* A callback that unlocks and frees its own lease. */
  struct lost_note self = {0, 0, 0, 0};
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"selffree", 8, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 1, on_lost_free_self, &self, err, sizeof err), REDLOCK_STATUS_OK);
  for (int i = 0; i < 2000 && !self.freed_itself; i++) sleep_ms(10);
  CHECK(self.freed_itself && self.was_lost);

  /* Freeing a lease while it is being renewed stops the renewal; the lock then expires (and
   * is taken within a wait of 10 TTLs: a renewal that went on would keep it held). */
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"freed", 5, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, on_lost, &note, err, sizeof err), REDLOCK_STATUS_OK);
  sleep_ms(500);
  redlock_lease_free(lease);
  redlock_lease *again = NULL;
  CHECK_STATUS(redlock_lock_wait(mgr, (const uint8_t *)"freed", 5, 1000, 10000, &again, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_unlock(again, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(again);

  /* Unlock stops renewal; stop_renewal alone leaves the lock to expire (2 s TTL: renewed
   * every third of it, late by more than a second on a busy machine without being lost). */
  lease = NULL;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"stopped", 7, 2000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_auto_renew(lease, 0, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  sleep_ms(1000);
  redlock_lease_stop_renewal(lease);
  CHECK(!redlock_lease_is_lost(lease));
  sleep_ms(2200); /* the last renewal's step began before the stop: expired a TTL after */
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
  struct timespec acquiring = mono_now();
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_WAIT, 1000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_fencing_token(lease) == 0);
  /* Held: a fenced attempt is refused. */
  redlock_lease *other = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_lock_opts(mgr, res, 6, 5000, REDLOCK_LOCK_FENCED | REDLOCK_LOCK_ONCE, 0, &other, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (redlock_lease *)0x1);
  CHECK_STATUS(redlock_extend(lease, 7000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_ttl_ms(lease) == 7000);

  /* Renewal state and the reason a lease was lost. The hold bound counts from the
   * acquisition: 1 s past what the steps since took, so that it has not come before the
   * checks that renewal is on (the steps may take a while under valgrind). */
  CHECK(!redlock_lease_is_renewing(lease));
  CHECK(!redlock_lease_wait_lost(lease, 10000)); /* renewal off: returns at once */
  uint32_t hold = (uint32_t)ms_since(&acquiring) + 1000;
  CHECK_STATUS(redlock_lease_auto_renew(lease, hold, 0, NULL, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_lease_is_renewing(lease));
  CHECK(redlock_lease_lost_reason(lease, err, sizeof err) == 0);
  CHECK(redlock_lease_wait_lost(lease, 30000));
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
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)"q", 1, 10000, &lease, err, sizeof err), REDLOCK_STATUS_OK);
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

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_auto_renew();
  test_auto_renew64();
  test_fencing_and_accessors();
  test_quarantine();
  return harness_finish();
}
