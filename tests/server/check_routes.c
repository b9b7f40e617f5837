/* check_routes.c: the route table and matcher (server/routes.c, server/router.c). */
#include <stdlib.h>
#include <string.h>

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

Suite *suite_routes(void)
{
	Suite *s = suite_create("routes");
	TCase *tc = tcase_create("match");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_match);
	tcase_add_test(tc, test_misses);
	tcase_add_test(tc, test_run_names);
	suite_add_tcase(s, tc);
	return s;
}
