/* TLS (rediss://) through the C ABI, against real redis-server nodes that serve TLS only and
 * require a client certificate (mutual TLS):
 *
 *   test_tls CA_PEM CLIENT_CERT_PEM CLIENT_KEY_PEM rediss://127.0.0.1:PORT ...
 *
 * `cargo test --test c_api` makes the certificates, starts the nodes and runs this program,
 * plain and under valgrind --leak-check=full --error-exitcode=1. Exit status 0 only if every
 * check passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const char *ca, *cert, *key;
static const char **urls;
static int n_urls;

/* A config over the nodes with the tests' generous timeouts; TLS options are the caller's.
 * Under valgrind on a busy machine a TLS handshake takes seconds (a connect timeout of 1 s
 * and a node timeout of 500 ms timed out every node of a first step); a handshake the node
 * refuses fails at once whatever the timeouts. */
static redlock_config *node_config(void) {
  char err[256];
  redlock_config *cfg = redlock_config_new();
  CHECK(cfg != NULL);
  for (int i = 0; i < n_urls; i++) CHECK_STATUS(redlock_config_add_node(cfg, urls[i], err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_timeouts(cfg, 10000, 5000, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_retry(cfg, 0, 10, err, sizeof err), REDLOCK_STATUS_OK);
  return cfg;
}

static redlock_manager *manager(redlock_config *cfg) {
  char err[512];
  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "manager: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && mgr != NULL);
  redlock_config_free(cfg);
  return mgr;
}

/* A PEM file's marker never appears in a message. */
static int clean(const char *msg) { return strstr(msg, "-----BEGIN") == NULL && strstr(msg, "PRIVATE KEY-----") == NULL; }

static void test_setters(void) {
  char err[512];
  redlock_config *cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_set_tls_ca_file(NULL, ca, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, "", err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  /* A missing file: INVALID_ARGUMENT naming the path. */
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, "/nonexistent/redlock-ca.pem", err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "/nonexistent/redlock-ca.pem") != NULL);
  /* A key where a CA bundle should be: refused, the key never quoted. */
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, key, err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, key) != NULL && strstr(err, "CERTIFICATE") != NULL && clean(err));
  CHECK_STATUS(redlock_config_set_tls_client_cert(cfg, cert, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_tls_client_cert(cfg, cert, cert, err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "PRIVATE KEY") != NULL && clean(err));
  CHECK_STATUS(redlock_config_set_tls_server_name(cfg, NULL, err, sizeof err), REDLOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(redlock_config_set_tls_server_name(cfg, "not a name!", err, sizeof err),
               REDLOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(err, "server name") != NULL);
  CHECK_STATUS(redlock_config_set_tls_server_name(cfg, "127.0.0.1", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_tls_insecure_skip_verify(NULL, true, err, sizeof err),
               REDLOCK_STATUS_NULL_ARGUMENT);
  /* Good files: accepted, each read now. */
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, ca, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_tls_client_cert(cfg, cert, key, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_config_free(cfg);
  /* Without the tls feature this would be INVALID_ARGUMENT; the C library has it. */
  cfg = redlock_config_new();
  CHECK_STATUS(redlock_config_add_node(cfg, "rediss://127.0.0.1:6380", err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_add_node(cfg, "rediss://127.0.0.1:0", err, sizeof err), REDLOCK_STATUS_INVALID_ARGUMENT);
  redlock_config_free(cfg);
  CHECK(REDLOCK_NODE_TLS == 10);
}

static void test_lock_over_mutual_tls(void) {
  char err[512];
  redlock_config *cfg = node_config();
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, ca, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_tls_client_cert(cfg, cert, key, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = manager(cfg);
  const char *res = "c:tls:lock";
  redlock_lease *lease = NULL;
  /* 30 s: the step includes the first TLS handshakes, seconds under valgrind on a busy
   * machine, and must end within the validity. */
  redlock_status st = redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 30000, &lease, err, sizeof err);
  if (st != REDLOCK_STATUS_OK) fprintf(stderr, "try_lock: %s\n", err);
  CHECK(st == REDLOCK_STATUS_OK && lease != NULL);
  if (lease) {
    CHECK(redlock_lease_granted(lease) * 2 > (size_t)n_urls);
    CHECK_STATUS(redlock_extend(lease, 10000, err, sizeof err), REDLOCK_STATUS_OK);
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_manager_free(mgr);
}

static void test_refused_without_a_client_certificate(void) {
  char err[1024];
  redlock_config *cfg = node_config();
  CHECK_STATUS(redlock_config_set_tls_ca_file(cfg, ca, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = manager(cfg);
  const char *res = "c:tls:refused";
  redlock_lease *lease = (redlock_lease *)0x1;
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 10000, &lease, err, sizeof err),
               REDLOCK_STATUS_UNAVAILABLE);
  CHECK(lease == (redlock_lease *)0x1);
  CHECK(strstr(err, "TLS failed") != NULL && strstr(err, "client certificate") != NULL);
  CHECK(strstr(err, "rediss://127.0.0.1:") != NULL && clean(err));
  redlock_manager_free(mgr);
}

static void test_insecure_skip_verify(void) {
  char err[512];
  /* No CA file: the system's trust store does not know the test CA; only skipping
   * verification lets this manager in (with the client certificate the nodes require). */
  redlock_config *cfg = node_config();
  CHECK_STATUS(redlock_config_set_tls_insecure_skip_verify(cfg, true, err, sizeof err), REDLOCK_STATUS_OK);
  CHECK_STATUS(redlock_config_set_tls_client_cert(cfg, cert, key, err, sizeof err), REDLOCK_STATUS_OK);
  redlock_manager *mgr = manager(cfg);
  const char *res = "c:tls:insecure";
  redlock_lease *lease = NULL;
  /* 30 s, as in test_lock_over_mutual_tls: the first handshakes are part of the step. */
  CHECK_STATUS(redlock_try_lock(mgr, (const uint8_t *)res, strlen(res), 30000, &lease, err, sizeof err),
               REDLOCK_STATUS_OK);
  if (lease) {
    CHECK_STATUS(redlock_unlock(lease, err, sizeof err), REDLOCK_STATUS_OK);
    redlock_lease_free(lease);
  }
  redlock_manager_free(mgr);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s CA_PEM CLIENT_CERT_PEM CLIENT_KEY_PEM rediss://127.0.0.1:PORT ...\n", argv[0]);
    return 2;
  }
  ca = argv[1];
  cert = argv[2];
  key = argv[3];
  urls = (const char **)(argv + 4);
  n_urls = argc - 4;
  test_setters();
  test_lock_over_mutual_tls();
  test_refused_without_a_client_certificate();
  test_insecure_skip_verify();
  printf("%d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
