/* Serves a manager's metrics in the Prometheus text format at /metrics, with a plain blocking
 * socket loop: the library has no HTTP server, and a metrics endpoint needs no more than this.
 *
 *   make -C bindings/c
 *   bindings/c/build/metrics_server --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
 *       --listen 127.0.0.1:9464 --serve-for 60
 *   curl http://127.0.0.1:9464/metrics
 *
 * It takes and releases one lock first, so that the counters have moved, prints
 * "serving http://ADDR/metrics" (with the port the kernel chose for --listen HOST:0), and then
 * answers requests one at a time until --serve-for seconds have passed (default 60) or, with
 * --requests N, after the Nth /metrics request, whichever comes first. Every request gets a
 * fresh snapshot (redlock_manager_metrics); any other path is a 404. Exit status: 0 after
 * serving, 2 for bad arguments, 1 when the listener cannot be set up.
 *
 * A real program would run this loop on a thread of its own beside its work, or hand the text
 * to the HTTP server it already has.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "redlock.h"

#define USAGE \
  "usage: metrics_server --nodes URL[,URL...] [--listen HOST:PORT] [--serve-for SECS] [--requests N]\n"
#define MAX_REQUEST 8192 /* bytes of request read at most: a scraper's GET is far shorter */
#define IO_TIMEOUT_S 2   /* how long one client may take to send its request or read the reply */

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Adds each comma-separated URL in `nodes` to `cfg`; 0 on success, else prints why. */
static int add_nodes(redlock_config *cfg, const char *nodes) {
  char err[512];
  char *copy = strdup(nodes);
  if (copy == NULL) return -1;
  int rc = 0;
  char *save = NULL;
  for (char *url = strtok_r(copy, ",", &save); url != NULL; url = strtok_r(NULL, ",", &save)) {
    if (redlock_config_add_node(cfg, url, err, sizeof err) != REDLOCK_STATUS_OK) {
      fprintf(stderr, "metrics_server: bad node %s: %s\n", url, err);
      rc = -1;
      break;
    }
  }
  free(copy);
  return rc;
}

/* Binds and listens on HOST:PORT ("[::1]:0" for IPv6); returns the socket or -1 (printed). */
static int listen_on(const char *listen_addr) {
  char host[256];
  const char *colon = strrchr(listen_addr, ':');
  size_t host_len = colon ? (size_t)(colon - listen_addr) : 0;
  if (colon == NULL || host_len == 0 || host_len >= sizeof host || colon[1] == '\0') {
    fprintf(stderr, "metrics_server: --listen %s: want HOST:PORT\n", listen_addr);
    return -1;
  }
  memcpy(host, listen_addr, host_len);
  host[host_len] = '\0';
  if (host[0] == '[' && host[host_len - 1] == ']') { /* [::1] */
    memmove(host, host + 1, host_len - 2);
    host[host_len - 2] = '\0';
  }
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int gai = getaddrinfo(host, colon + 1, &hints, &res);
  if (gai != 0) {
    fprintf(stderr, "metrics_server: --listen %s: %s\n", listen_addr, gai_strerror(gai));
    return -1;
  }
  int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    fprintf(stderr, "metrics_server: listen on %s: %s\n", listen_addr, strerror(errno));
    if (fd >= 0) close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

/* Prints "serving http://ADDR/metrics" with the address the listener really has. */
static int print_serving(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char ip[INET6_ADDRSTRLEN];
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) return -1;
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
    printf("serving http://[%s]:%u/metrics\n", ip, ntohs(a->sin6_port));
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    printf("serving http://%s:%u/metrics\n", ip, ntohs(a->sin_port));
  }
  return fflush(stdout);
}

static int send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    /* MSG_NOSIGNAL: a client that hung up is an error here, not a SIGPIPE for the server. */
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int respond(int fd, const char *status, const char *body, size_t body_len) {
  char head[256];
  /* version=0.0.4 is the Prometheus text format's content type; one response per connection. */
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   status, body_len);
  if (send_all(fd, head, (size_t)n) != 0) return -1;
  return send_all(fd, body, body_len);
}

/* The metrics text in a malloc'd buffer (NULL when out of memory); *len gets its length. */
static char *metrics_text(const redlock_manager *mgr, size_t *len) {
  size_t cap = 16384;
  for (;;) {
    char *buf = malloc(cap);
    if (buf == NULL) return NULL;
    size_t need = redlock_manager_metrics(mgr, buf, cap);
    if (need < cap) {
      *len = need;
      return buf;
    }
    free(buf); /* cut short: the snprintf convention says how much to ask for */
    cap = need + 1;
  }
}

/* Reads one request on `fd` and answers it; 1 when it was GET /metrics, 0 for another
 * request, -1 when the client failed (timed out, hung up). */
static int answer(int fd, const redlock_manager *mgr) {
  struct timeval tv = {IO_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char req[MAX_REQUEST + 1];
  size_t got = 0;
  req[0] = '\0';
  while (strstr(req, "\r\n\r\n") == NULL) {
    if (got == MAX_REQUEST) {
      const char *msg = "too long\n";
      respond(fd, "431 Request Header Fields Too Large", msg, strlen(msg));
      return 0;
    }
    ssize_t r = recv(fd, req + got, MAX_REQUEST - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
    req[got] = '\0';
  }
  if (strncmp(req, "GET ", 4) != 0) {
    const char *msg = "GET only\n";
    respond(fd, "405 Method Not Allowed", msg, strlen(msg));
    return 0;
  }
  if (strncmp(req + 4, "/metrics ", 9) != 0) {
    const char *msg = "try /metrics\n";
    respond(fd, "404 Not Found", msg, strlen(msg));
    return 0;
  }
  size_t len = 0;
  char *text = metrics_text(mgr, &len);
  if (text == NULL) {
    const char *msg = "out of memory\n";
    respond(fd, "500 Internal Server Error", msg, strlen(msg));
    return -1;
  }
  int rc = respond(fd, "200 OK", text, len);
  free(text);
  return rc == 0 ? 1 : -1;
}

/* Parses a whole decimal number in [min, max]; 0 on success. */
static int parse_num(const char *s, double min, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) return -1;
  *out = v;
  return 0;
}

/* One lock and unlock, so that the acquire, hold, unlock and per-node series are not all 0.
 * A failure is counted too: serve anyway. */
static void lock_once(redlock_manager *mgr) {
  char err[512];
  const char *resource = "metrics_server:example";
  redlock_lease *lease = NULL;
  redlock_status st =
      redlock_lock(mgr, (const uint8_t *)resource, strlen(resource), 10000, &lease, err, sizeof err);
  if (st == REDLOCK_STATUS_OK) {
    st = redlock_unlock(lease, err, sizeof err);
    if (st != REDLOCK_STATUS_OK) fprintf(stderr, "metrics_server: unlock: %s\n", err);
    redlock_lease_free(lease);
  } else {
    fprintf(stderr, "metrics_server: lock: %s\n", err);
  }
}

/* Serves /metrics on lfd until serve_for_s have passed or `requests` were answered (0: no
 * limit), counting them in *served; 0 unless printing the address or poll failed. */
static int serve(int lfd, redlock_manager *mgr, double serve_for_s, double requests, long long *served) {
  int rc = 0;
  if (print_serving(lfd) != 0) rc = 1;
  long long deadline = now_ms() + (long long)(serve_for_s * 1000);
  while (rc == 0 && (requests == 0 || *served < (long long)requests)) {
    /* Wait for a client no longer than the time left, recomputed after every wake-up. */
    long long left = deadline - now_ms();
    if (left <= 0) break;
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fprintf(stderr, "metrics_server: poll: %s\n", strerror(errno));
      rc = 1;
      break;
    }
    if (n == 0) continue;
    int cfd = accept(lfd, NULL, NULL);
    if (cfd < 0) continue; /* the client gave up meanwhile, or EINTR */
    int r = answer(cfd, mgr);
    close(cfd);
    if (r == 1) (*served)++;
    else if (r < 0) fprintf(stderr, "metrics_server: a request failed\n");
  }
  return rc;
}

int main(int argc, char **argv) {
  const char *nodes = NULL, *listen_addr = "127.0.0.1:9464";
  double serve_for_s = 60, requests = 0; /* requests 0: no limit */
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      fputs(USAGE, stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "metrics_server: %s needs a value\n" USAGE, arg);
      return 2;
    }
    const char *value = argv[++i];
    if (strcmp(arg, "--nodes") == 0) {
      nodes = value;
    } else if (strcmp(arg, "--listen") == 0) {
      listen_addr = value;
    } else if (strcmp(arg, "--serve-for") == 0) {
      if (parse_num(value, 0, 86400 * 365, &serve_for_s) != 0) {
        fprintf(stderr, "metrics_server: --serve-for %s: want seconds\n" USAGE, value);
        return 2;
      }
    } else if (strcmp(arg, "--requests") == 0) {
      if (parse_num(value, 1, 1e15, &requests) != 0 || requests != (double)(long long)requests) {
        fprintf(stderr, "metrics_server: --requests %s: want a whole number >= 1\n" USAGE, value);
        return 2;
      }
    } else {
      fprintf(stderr, "metrics_server: unknown argument %s\n" USAGE, arg);
      return 2;
    }
  }
  if (nodes == NULL) {
    fputs("metrics_server: --nodes is required\n" USAGE, stderr);
    return 2;
  }

  char err[512];
  redlock_config *cfg = redlock_config_new();
  if (cfg == NULL || add_nodes(cfg, nodes) != 0) {
    redlock_config_free(cfg);
    return 2;
  }
  redlock_manager *mgr = NULL;
  redlock_status st = redlock_manager_new(cfg, &mgr, err, sizeof err);
  redlock_config_free(cfg);
  if (st != REDLOCK_STATUS_OK) {
    fprintf(stderr, "metrics_server: %s\n", err);
    return 2;
  }

  int lfd = listen_on(listen_addr);
  if (lfd < 0) {
    redlock_manager_free(mgr);
    return 1;
  }

  lock_once(mgr);

  long long served = 0;
  int rc = serve(lfd, mgr, serve_for_s, requests, &served);
  close(lfd);
  redlock_manager_free(mgr);
  if (rc == 0) printf("served %lld /metrics requests\n", served);
  return rc;
}
