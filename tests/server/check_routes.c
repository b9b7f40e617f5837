/* check_routes.c: the route table and matcher (server/routes.c, server/router.c), and the
 * listening socket server_start() takes before anything else (server/http.c). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http.h"
#include "testutil.h"

#include "routes.h"
#include "suites.h"

static enum route_match match(const char *method, const char *path, const struct route **r,
			      char *params[], char *allow)
{
	const char *bad = NULL;

	params[0] = params[1] = NULL;
	return route_match(&server_routes, method, path, r, params, allow, 64, &bad);
}

START_TEST(test_match)
{
	const struct route *r = NULL;
	char *p[ROUTE_MAX_PARAMS], allow[64];

	ck_assert_int_eq(match("GET", "/healthz", &r, p, allow), ROUTE_FOUND);
	ck_assert_str_eq(r->pattern, "/healthz");
	ck_assert_int_eq(match("GET", "/api/v1/runs/my-run.1/artifacts/42/raw", &r, p, allow), ROUTE_FOUND);
	ck_assert_str_eq(r->pattern, "/api/v1/runs/{run}/artifacts/{id}/raw");
	ck_assert_str_eq(p[0], "my-run.1");
	ck_assert_str_eq(p[1], "42");
	free(p[0]);
	free(p[1]);
	ck_assert_int_eq(match("POST", "/api/v1/runs/r/artifacts", &r, p, allow), ROUTE_FOUND);
	ck_assert(r->flags & ROUTE_BODY);
	ck_assert(r->flags & ROUTE_WRITE);
	free(p[0]);
	ck_assert_int_eq(match("HEAD", "/api/v1/runs", &r, p, allow), ROUTE_FOUND);
}
END_TEST

START_TEST(test_misses)
{
	const struct route *r = NULL;
	char *p[ROUTE_MAX_PARAMS], allow[64];

	ck_assert_int_eq(match("GET", "/nope", &r, p, allow), ROUTE_NO_PATH);
	ck_assert_int_eq(match("GET", "/api/v1/runs/", &r, p, allow), ROUTE_NO_PATH);
	ck_assert_int_eq(match("GET", "/api/v1/runs/a/b/c/d/e", &r, p, allow), ROUTE_NO_PATH);
	ck_assert_int_eq(match("DELETE", "/healthz", &r, p, allow), ROUTE_NO_METHOD);
	ck_assert_str_eq(allow, "GET");
	ck_assert_int_eq(match("PUT", "/api/v1/runs/x/artifacts", &r, p, allow), ROUTE_NO_METHOD);
	ck_assert_str_eq(allow, "POST");
	ck_assert_int_eq(match("GET", "/api/v1/runs/bad$name", &r, p, allow), ROUTE_BAD_PARAM);
	free(p[0]);
	ck_assert_int_eq(match("GET", "/api/v1/runs/r/artifacts/12a", &r, p, allow), ROUTE_BAD_PARAM);
	free(p[0]);
	free(p[1]);
}
END_TEST

START_TEST(test_run_names)
{
	char long_name[200];

	ck_assert(route_valid_run_name("resnet50_bs64-v2.1"));
	ck_assert(!route_valid_run_name(""));
	ck_assert(!route_valid_run_name("."));
	ck_assert(!route_valid_run_name(".."));
	ck_assert(!route_valid_run_name("a b"));
	ck_assert(!route_valid_run_name("a/b"));
	ck_assert(!route_valid_run_name("caf\xc3\xa9"));
	memset(long_name, 'a', 128);
	long_name[128] = 0;
	ck_assert(route_valid_run_name(long_name));
	long_name[128] = 'a';
	long_name[129] = 0;
	ck_assert(!route_valid_run_name(long_name));
}
END_TEST

/* An address already taken: server_start fails before it makes, opens or migrates the database. */
START_TEST(test_start_port_taken)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char *dir = tu_tmpdir(), listen_at[64], db[512];
	struct server_config cfg = { .routes = &server_routes, .threads = 2, .grace_s = 1,
				     .limits = ingest_default_limits };
	struct tp_errbuf err = { 0 };
	struct server *srv = NULL;
	struct stat sb;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%u", ntohs(sa.sin_port));
	snprintf(db, sizeof(db), "%s/taken.db", dir);
	cfg.listen = listen_at;
	cfg.db_path = db;
	ck_assert_int_ne(server_start(&cfg, &srv, &err), 0);
	ck_assert_ptr_null(srv);
	ck_assert_msg(strstr(err.msg, "cannot listen on") != NULL, "%s", err.msg);
	ck_assert_int_eq(stat(db, &sb), -1);
	close(fd);
	/* free now: the same call serves, and only then is the database made */
	ck_assert_int_eq(server_start(&cfg, &srv, &err), 0);
	ck_assert_int_eq(server_port(srv), ntohs(sa.sin_port));
	ck_assert_int_eq(stat(db, &sb), 0);
	server_stop(srv);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

Suite *suite_routes(void)
{
	Suite *s = suite_create("routes");
	TCase *tc = tcase_create("match");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_match);
	tcase_add_test(tc, test_misses);
	tcase_add_test(tc, test_run_names);
	tcase_add_test(tc, test_start_port_taken);
	suite_add_tcase(s, tc);
	return s;
}
