/* The counting semaphore.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

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

/* test_semaphore's last step. */
static void semaphore_bad_input(redlock_manager *mgr) {
  char err[512];
  redlock_lease *other;
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

  semaphore_bad_input(mgr);
  redlock_acquire_opts_free(opts);
  redlock_acquire_opts_free(once);
  redlock_manager_free(waiter_mgr);
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_semaphore();
  return harness_finish();
}
