/*
 * main_unit.c: the unit runner: every module's suite, no server.
 */
#include <stdlib.h>

#include "suites.h"
#include "tp.h"

int main(void)
{
	SRunner *sr;
	int failed;

	tp_log_threshold = TP_LOG_WARN;
	sr = srunner_create(suite_sha256());
	srunner_add_suite(sr, suite_num());
	srunner_add_suite(sr, suite_inflate());
	srunner_add_suite(sr, suite_jtok());
	srunner_add_suite(sr, suite_trace());
	srunner_add_suite(sr, suite_ingest());
	srunner_add_suite(sr, suite_routes());
	srunner_add_suite(sr, suite_evpack());
	srunner_add_suite(sr, suite_store());
	srunner_add_suite(sr, suite_alloc());
	srunner_add_suite(sr, suite_analysis());
	srunner_add_suite(sr, suite_analysis_pytorch());
	srunner_add_suite(sr, suite_analysis_spill());
	srunner_add_suite(sr, suite_timeline());
	srunner_add_suite(sr, suite_snapshot());
	srunner_add_suite(sr, suite_stats());
	srunner_add_suite(sr, suite_runline());
	srunner_add_suite(sr, suite_textfmt());
	srunner_add_suite(sr, suite_canary());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
