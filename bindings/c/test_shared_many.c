/* Shared (read) locks, and sets of resources taken at once (redlock_acquire_many), with
 * its bad input.
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

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
/* test_shared in three phases, each with its own locals; what they share is here. */
enum { READERS = 4 };

struct shared_case {
  redlock_manager *mgr, *writer;
  const uint8_t *res;
  size_t rlen;
  redlock_acquire_opts *sh, *ex;
};

/* Shared holders together; exclusive tries refused until the last has unlocked, then one
 * granted, and shared ones refused while it holds. 0 if a lease was not granted: the test
 * stops there. */
static int shared_then_exclusive(const struct shared_case *c) {
  char err[512];
  redlock_manager *mgr = c->mgr, *writer = c->writer;
  const uint8_t *res = c->res;
  size_t rlen = c->rlen;
  redlock_acquire_opts *sh = c->sh;
  redlock_acquire_opts *ex = c->ex;
  /* Four shared holders from one manager, at once. */
  redlock_lease *readers[READERS] = {0};
  for (int i = 0; i < READERS; i++) {
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    if (!readers[i]) return 0;
    CHECK(redlock_lease_is_shared(readers[i]));
    CHECK(redlock_lease_is_valid(readers[i]));
    CHECK(redlock_lease_resource_count(readers[i]) == 1);
    size_t len = 0;
    const uint8_t *got = redlock_lease_resource_at(readers[i], 0, &len);
    CHECK(got != NULL && len == rlen && memcmp(got, res, len) == 0);
    for (int j = 0; j < i; j++) CHECK(strcmp(redlock_lease_token(readers[i]), redlock_lease_token(readers[j])) != 0);
  }
  struct timespec began = mono_now();
  CHECK_STATUS(redlock_extend(readers[0], 15000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(fresh_validity(redlock_lease_validity_ms(readers[0]), 15000, &began)); /* less the drift and the step */
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
  if (!x) return 0;
  CHECK(!redlock_lease_is_shared(x));
  /* Held exclusively: a shared acquisition is refused. */
  redlock_lease *r = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_acquire(mgr, res, rlen, 10000, sh, &r, err, sizeof err), REDLOCK_STATUS_NOT_ACQUIRED);
  CHECK(r == (redlock_lease *)0x1);
  CHECK_STATUS(redlock_unlock(x, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(x);
  return 1;
}

/* A shared acquisition (c->sh) of c->res while an exclusive locker waits: polled until it is
 * refused (at most 30 s), as the locker's intent is queued only once its first attempt has been
 * refused, which a busy machine under valgrind may take a while to reach. A shared lease
 * granted before that is released at once. The last status; *out as the last attempt left it. */
static redlock_status shared_behind_writer(const struct shared_case *c, redlock_lease **out) {
  char err[512];
  redlock_status st = REDLOCK_STATUS_INTERNAL;
  for (int i = 0; i < 300; i++) {
    st = redlock_acquire(c->mgr, c->res, c->rlen, 10000, c->sh, out, err, sizeof err);
    if (st != REDLOCK_STATUS_OK) break;
    fprintf(stderr, "shared acquisition %d granted before the writer's intent; again\n", i);
    CHECK_STATUS(redlock_unlock(*out, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(*out);
    *out = (redlock_lease *)0x1;
    sleep_ms(100);
  }
  if (st != REDLOCK_STATUS_NOT_ACQUIRED) fprintf(stderr, "shared acquisition: %s\n", err);
  return st;
}

/* A waiting exclusive locker and the shared acquisitions that queue behind it. 0 if a lease
 * was not granted: the test stops there. */
static int shared_writer_waits(const struct shared_case *c) {
  char err[512];
  redlock_manager *mgr = c->mgr, *writer = c->writer;
  const uint8_t *res = c->res;
  size_t rlen = c->rlen;
  redlock_acquire_opts *sh = c->sh;
  redlock_lease *readers[READERS] = {0};
  redlock_lease *r;
  /* A waiting exclusive locker in another thread gets the lock only after the last shared
   * unlock; while it waits, new shared acquisitions queue behind it (writer preference). */
  for (int i = 0; i < READERS; i++) {
    readers[i] = NULL;
    CHECK_STATUS(redlock_acquire(mgr, res, rlen, 30000, sh, &readers[i], err, sizeof err), REDLOCK_STATUS_OK);
    if (!readers[i]) return 0;
  }
  redlock_acquire_opts *ex_wait = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_wait_ms(ex_wait, 60000), REDLOCK_STATUS_OK);
  struct exclusive_waiter w = {writer, ex_wait, res, rlen, REDLOCK_STATUS_INTERNAL, NULL, 0, {0, 0}};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, wait_exclusive, &w) == 0);
  sleep_ms(300);
  CHECK(!__atomic_load_n(&w.finished, __ATOMIC_SEQ_CST));
  r = (redlock_lease *)0x1;
  CHECK_STATUS(shared_behind_writer(c, &r), REDLOCK_STATUS_NOT_ACQUIRED);
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
  redlock_acquire_opts_free(ex_wait);
  return 1;
}

/* Shared with an owner refused; without the owner and shared false, exclusive. */
static void shared_with_owner(const struct shared_case *c) {
  char err[512];
  redlock_manager *mgr = c->mgr;
  const uint8_t *res = c->res;
  size_t rlen = c->rlen;
  redlock_acquire_opts *sh = c->sh;
  redlock_lease *r;
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
}


/* Shared (read) locks: many holders together, an exclusive lock refused while any holds (and
 * shared ones refused while it holds), a waiting exclusive locker granted only after the last
 * shared unlock, and shared with an owner refused. */
static void test_shared(void) {
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

  struct shared_case c = {mgr, writer, res, rlen, sh, ex};
  if (!shared_then_exclusive(&c)) return;
  if (!shared_writer_waits(&c)) return;
  shared_with_owner(&c);
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

/* test_acquire_many's checks of the lease for its set of N: every name, in order. */
static void many_check_lease(redlock_lease *lease, const uint8_t *const *res, const size_t *lens, const uint8_t *a,
                             const struct timespec *began) {
  enum { N = 3 }; /* test_acquire_many's set */
  CHECK(!redlock_lease_is_shared(lease));
  CHECK(fresh_validity(redlock_lease_validity_ms(lease), 10000, began));
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
}

/* test_acquire_many's last step. */
static void many_at_most(redlock_manager *mgr) {
  char err[512];
  redlock_lease *lease;
  size_t len;
  /* REDLOCK_MAX_RESOURCES at once is allowed. */
  fill_many("c-max-");
  lease = NULL;
  CHECK_STATUS(redlock_acquire_many(mgr, many, many_lens, REDLOCK_MAX_RESOURCES, 10000, NULL, &lease, err, sizeof err),
               REDLOCK_STATUS_OK);
  CHECK(redlock_lease_resource_count(lease) == REDLOCK_MAX_RESOURCES);
  CHECK(redlock_lease_resource_at(lease, REDLOCK_MAX_RESOURCES - 1, &len) != NULL && len == many_lens[REDLOCK_MAX_RESOURCES - 1]);
  CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_lease_free(lease);
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
  struct timespec began = mono_now();
  CHECK_STATUS(redlock_acquire_many(mgr, res, lens, N, 10000, NULL, &lease, err, sizeof err), REDLOCK_STATUS_OK);
  if (!lease) return;
  many_check_lease(lease, res, lens, a, &began);

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
  began = mono_now();
  CHECK_STATUS(redlock_extend(lease, 20000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(fresh_validity(redlock_lease_validity_ms(lease), 20000, &began));
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
  many_at_most(mgr);

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

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_shared();
  test_acquire_many();
  test_acquire_many_bad_input();
  return harness_finish();
}
