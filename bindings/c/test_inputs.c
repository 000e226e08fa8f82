/* Bad input, NULL arguments, handles that are not live, status strings and error codes
 * (authentication failures among them).
 * Tests of the C ABI against real redis-server nodes whose URLs are given as arguments;
 * `cargo test --test c_api` starts three nodes and runs this program, plain and under
 * valgrind. The checks and helpers are harness.h's. */
#include "harness.h"

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

/* redlock_acquire_check and redlock_acquire_many_check: the acquisition's input rules, with
 * its messages, and nothing sent (the manager's node is a closed port: a check that sent
 * anything could not answer OK). */
static void test_input_checks(void) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, "redis://127.0.0.1:1", err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  const uint8_t *r = (const uint8_t *)"r";
  CHECK_STATUS(redlock_acquire_check(mgr, r, 1, 1000, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_check(mgr, r, 1, 0, NULL, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "TTL") != NULL);
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_shared(opts, true), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, (const uint8_t *)"o", 1), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_check(mgr, r, 1, 1000, opts, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "a shared lock has no owner") != NULL);
  const uint8_t *names[] = {(const uint8_t *)"a", (const uint8_t *)"a"};
  size_t lens[] = {1, 1};
  CHECK_STATUS(redlock_acquire_many_check(mgr, names, lens, 1, 1000, NULL, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_many_check(mgr, names, lens, 2, 1000, NULL, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "is resource 0 again") != NULL);
  CHECK_STATUS(redlock_acquire_many_check(mgr, NULL, NULL, 0, 1000, NULL, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_many_check(mgr, names, lens, 1, 1000, opts, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_check(NULL, r, 1, 1000, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  /* Admitting nodes: bad input is refused before anything is sent. */
  size_t admit[] = {1};
  CHECK_STATUS(redlock_manager_admit_new_nodes(mgr, admit, 1, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "node 1: there are 1 nodes") != NULL);
  CHECK_STATUS(redlock_manager_admit_new_nodes(mgr, NULL, 1, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_manager_admit_new_nodes(NULL, admit, 1, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  redlock_acquire_opts_free(opts);
  redlock_manager_free(mgr);
}

/* An owner id out of range: redlock_acquire_opts_set_owner_err says which argument and its
 * limit; redlock_acquire_opts_set_owner, without a buffer, keeps its status. The options are
 * unchanged either way. */
static void test_owner_messages(void) {
  char err[256];
  uint8_t big[REDLOCK_MAX_OWNER_LEN + 1];
  memset(big, 'o', sizeof big);
  redlock_acquire_opts *opts = redlock_acquire_opts_new();
  CHECK_STATUS(redlock_acquire_opts_set_owner_err(opts, big, sizeof big, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strcmp(err, "owner id is 513 bytes; it must be 1 to 512 bytes") == 0);
  CHECK_STATUS(redlock_acquire_opts_set_owner_err(opts, big, 0, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strcmp(err, "owner id is 0 bytes; it must be 1 to 512 bytes") == 0);
  CHECK_STATUS(redlock_acquire_opts_set_owner_err(opts, NULL, 3, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK(strcmp(err, "owner is NULL") == 0);
  CHECK_STATUS(redlock_acquire_opts_set_owner_err(NULL, big, 1, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, big, sizeof big), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(redlock_acquire_opts_set_owner_err(opts, big, REDLOCK_MAX_OWNER_LEN, NULL, 0), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_acquire_opts_set_owner(opts, big, 1), REDLOCK_STATUS_OK);
  redlock_acquire_opts_free(opts);
}

/* A node list split at its commas may keep the spaces after them. */
static void test_node_url_spaces(void) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, " redis://127.0.0.1:1", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "127.0.0.1:2 ", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "\t127.0.0.1:3", err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = NULL;
  CHECK_STATUS(redlock_manager_new(cfg, &mgr, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK(redlock_manager_node_count(mgr) == 3);
  redlock_config_free(cfg);
  redlock_manager_free(mgr);
}

/* Two of three nodes refuse the credentials (these nodes require no password, so AUTH with
 * one fails): the quorum is lost to authentication, which has its own status. */
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
  /* Generous timeouts, as make_manager's: the refusals must come back as answers (under
   * valgrind, the default 250 ms connect timeout could cut a handshake short, and a node
   * that timed out is down, not refusing: UNAVAILABLE instead of AUTH). */
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 5000, 2000, err, sizeof err), REDLOCK_STATUS_OK);
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

int main(int argc, char **argv) {
  if (!harness_start(argc, argv)) return 2;
  test_status_strings();
  test_null_arguments();
  test_invalid_handles();
  test_bad_input();
  test_input_checks();
  test_owner_messages();
  test_node_url_spaces();
  test_auth_failure();
  return harness_finish();
}
