/*
 * main_e2e.c: the end-to-end runner: the real trainscope-server on loopback,
 * driven with libcurl, and trainscope-collect against it.
 */
#include <curl/curl.h>
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr;
	int failed;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	sr = srunner_create(suite_upload());
	srunner_add_suite(sr, suite_bad_input());
	srunner_add_suite(sr, suite_analysis_api());
	srunner_add_suite(sr, suite_compare());
	srunner_add_suite(sr, suite_collect());
	srunner_add_suite(sr, suite_collect_watch());
	srunner_add_suite(sr, suite_collect_run());
	srunner_add_suite(sr, suite_collect_capture());
	srunner_add_suite(sr, suite_api_contract());
	srunner_add_suite(sr, suite_runs());
	srunner_add_suite(sr, suite_runs_chunks());
	srunner_add_suite(sr, suite_runs_derive());
	srunner_add_suite(sr, suite_distributed());
	srunner_add_suite(sr, suite_formats());
	srunner_add_suite(sr, suite_gpu());
	srunner_add_suite(sr, suite_overlap());
	srunner_add_suite(sr, suite_captures());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
