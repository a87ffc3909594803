/* server/gate: the --host address list (several listeners on one port, IPv4 and IPv6 clients
 * counted and handed over alike) and the lists it refuses. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "server/gate.h"
#include "util/err.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_int n_handed;
static atomic_int n_handed_v6;

static bool take(void *ctx, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
    struct gate **g = ctx;
    atomic_fetch_add(&n_handed, 1);
    if (addr->sa_family == AF_INET6 && addr_len >= sizeof(struct sockaddr_in6))
        atomic_fetch_add(&n_handed_v6, 1);
    close(fd);
    gate_connection_closed(*g, addr);
    return true;
}

static bool has_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) return false;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool is_ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return is_ok;
}

/* Connects to addr and sends one request head; the descriptor, or -1. */
static int send_head(const struct sockaddr *addr, socklen_t len)
{
    int fd = socket(addr->sa_family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    static const char head[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    if (connect(fd, addr, len) != 0 || send(fd, head, sizeof head - 1, 0) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void wait_handed(int n)
{
    for (int i = 0; i < 400 && atomic_load(&n_handed) < n; i++)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
}

static void test_gate_listens_on_every_address(void **state)
{
    (void)state;
    if (!has_ipv6_loopback()) {
        skip(); // no IPv6 loopback on this host
    }
    struct gate *g = NULL;
    const struct gate_config c = {.host = " 127.0.0.1 , [::1] ",
                                  .port = 0,
                                  .max_connections = 8,
                                  .max_per_address = 4,
                                  .header_timeout_ms = 5000,
                                  .body_max = 1 << 20,
                                  .handoff = take,
                                  .handoff_ctx = &g};
    struct errmsg err = {0};
    atomic_store(&n_handed, 0);
    atomic_store(&n_handed_v6, 0);
    assert_int_equal(gate_start(&c, &g, &err), ERR_OK);
    int port = gate_port(g);
    assert_true(port > 0);

    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6,
                              .sin6_port = htons((uint16_t)port),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int a = send_head((struct sockaddr *)&v4, sizeof v4);
    int b = send_head((struct sockaddr *)&v6, sizeof v6);
    assert_true(a >= 0);
    assert_true(b >= 0); // the same port on the second address
    wait_handed(2);
    assert_int_equal(atomic_load(&n_handed), 2);
    assert_int_equal(atomic_load(&n_handed_v6), 1);
    close(a);
    close(b);
    for (int i = 0; i < 200 && gate_open_count(g) != 0; i++)
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    assert_int_equal(gate_open_count(g), 0); // both addresses' places were given back
    gate_free(g);
}

static void test_gate_refuses_bad_lists(void **state)
{
    (void)state;
    static const char *const bad[] = {"", " , ", "/tmp/llamapi.sock", "127.0.0.1,/tmp/x.sock"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gate *g = (struct gate *)&g; // must come back NULL
        const struct gate_config c = {.host = bad[i],
                                      .port = 0,
                                      .max_connections = 8,
                                      .header_timeout_ms = 1000,
                                      .body_max = 1024,
                                      .handoff = take,
                                      .handoff_ctx = NULL};
        struct errmsg err = {0};
        assert_int_equal(gate_start(&c, &g, &err), ERR_INVALID);
        assert_true(err.msg[0] != 0);
        assert_true(strstr(err.msg, "--host") != NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_listens_on_every_address),
        cmocka_unit_test(test_gate_refuses_bad_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
