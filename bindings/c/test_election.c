/* Leader election.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

/* Campaign, read the leader, proclaim, resign; a waiting candidate woken by the resignation
 * with a higher term; an observer's wait for a change; no leader and timeouts as statuses;
 * bad input refused. */
static const uint8_t ELECTION[] = "c-election";

static void *campaign_b(void *arg) {
  struct waiter *w = arg;
  char err[512];
  w->status = redlock_campaign(w->mgr, ELECTION, sizeof ELECTION - 1, (const uint8_t *)"b", 1, 30000, w->opts, &w->lease, err, sizeof err);
  clock_gettime(CLOCK_MONOTONIC, &w->done);
  return NULL;
}

static void check_leader(redlock_manager *mgr, uint64_t term, const char *value) {
  char err[512];
  redlock_leader *l = NULL;
  CHECK_STATUS(redlock_leader_get(mgr, ELECTION, sizeof ELECTION - 1, &l, err, sizeof err), REDLOCK_STATUS_OK);
  if (!l) return;
  size_t len = 0;
  const uint8_t *v = redlock_leader_value(l, &len);
  CHECK(redlock_leader_term(l) == term);
  CHECK(len == strlen(value) && memcmp(v, value, len) == 0);
  CHECK(redlock_leader_validity_ms(l) > 0 && redlock_leader_validity_ms(l) <= 30000);
  redlock_leader_free(l);
}

static void election_bad_input(redlock_manager *mgr) {
  char err[512];
  redlock_lease *out = (redlock_lease *)0x1;
  static uint8_t big[REDLOCK_MAX_LEADER_VALUE + 1];
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, sizeof ELECTION - 1, big, sizeof big, 1000, NULL, &out, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "value") != NULL);
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, 0, NULL, 0, 1000, NULL, &out, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, sizeof ELECTION - 1, NULL, 3, 1000, NULL, &out, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, sizeof ELECTION - 1, NULL, 0, 1000, NULL, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_acquire_opts *shared = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_shared(shared, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, sizeof ELECTION - 1, NULL, 0, 1000, shared, &out, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "shared") != NULL);
  redlock_acquire_opts_free(shared);
  CHECK(out == (redlock_lease *)0x1);
  redlock_leader *l = (redlock_leader *)0x1;
  CHECK_STATUS(redlock_leader_get(mgr, ELECTION, sizeof ELECTION - 1, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_leader_get(NULL, ELECTION, sizeof ELECTION - 1, &l, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  /* A plain lock's lease cannot proclaim. */
  redlock_lease *lock = NULL;
  CHECK_STATUS(redlock_acquire(mgr, (const uint8_t *)"c-plain", 7, 10000, NULL, &lock, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_lease_proclaim(lock, (const uint8_t *)"x", 1, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "leadership") != NULL);
  CHECK_STATUS(redlock_unlock(lock, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lock);
  CHECK(redlock_leader_term(NULL) == 0 && redlock_leader_validity_ms(NULL) == 0);
  size_t len = 7;
  CHECK(redlock_leader_value(NULL, &len) == NULL && len == 0);
  redlock_leader_free(NULL);
}

static void test_election(void) {
  char err[512];
  redlock_manager *mgr = make_manager(0, 5000);
  redlock_manager *other = make_manager(0, 5000);
  redlock_leader *l = (redlock_leader *)0x1;
  /* No leader yet: NOT_HELD, *out NULL; a change not seen in time: NOT_ACQUIRED, *out NULL. */
  CHECK_STATUS(redlock_leader_get(mgr, ELECTION, sizeof ELECTION - 1, &l, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
  CHECK(l == NULL);
  l = (redlock_leader *)0x1;
  CHECK_STATUS(redlock_leader_wait_change(mgr, ELECTION, sizeof ELECTION - 1, 0, 50, &l, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(l == NULL);

  redlock_lease *a = NULL;
  CHECK_STATUS(redlock_campaign(mgr, ELECTION, sizeof ELECTION - 1, (const uint8_t *)"a", 1, 30000, NULL, &a, err, sizeof err), REDLOCK_STATUS_OK);
  if (!a) return;
  uint64_t t1 = redlock_lease_fencing_token(a);
  CHECK(t1 > 0);
  CHECK(redlock_lease_is_renewing(a));
  check_leader(mgr, t1, "a");
  CHECK_STATUS(redlock_lease_proclaim(a, (const uint8_t *)"a2", 2, err, sizeof err), REDLOCK_STATUS_OK);
  check_leader(other, t1, "a2");
  /* An observer that has seen term t1 waits for the next one. */
  CHECK_STATUS(redlock_leader_wait_change(other, ELECTION, sizeof ELECTION - 1, t1, 50, &l, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);

  /* A second candidate waits, and is woken by the resignation. */
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(opts, 60000), REDLOCK_STATUS_OK);
  struct waiter w = {.mgr = other, .opts = opts};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, campaign_b, &w) == 0);
  struct timespec pause = {0, 300 * 1000000};
  nanosleep(&pause, NULL);
  CHECK_STATUS(redlock_unlock(a, err, sizeof err), REDLOCK_STATUS_OK);
  pthread_join(t, NULL);
  CHECK_STATUS(w.status, REDLOCK_STATUS_OK);
  if (w.lease) {
    uint64_t t2 = redlock_lease_fencing_token(w.lease);
    CHECK(t2 > t1);
    l = NULL;
    CHECK_STATUS(redlock_leader_wait_change(mgr, ELECTION, sizeof ELECTION - 1, t1, 10000, &l, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK(l != NULL && redlock_leader_term(l) == t2);
    redlock_leader_free(l);
    CHECK_STATUS(redlock_unlock(w.lease, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_lease_proclaim(w.lease, (const uint8_t *)"late", 4, err, sizeof err), REDLOCK_STATUS_NOT_HELD);
    redlock_lease_free(w.lease);
  }
  redlock_lease_free(a);
  election_bad_input(mgr);
  redlock_acquire_opts_free(opts);
  redlock_manager_free(other);
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_election();
  return harness_finish();
}
