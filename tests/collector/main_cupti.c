/*
 * main_cupti.c: the runner of the CUPTI library's suite, built only where
 * CUPTI is found (collector/cupti/CMakeLists.txt).
 */
#include <curl/curl.h>
#include <stdlib.h>

#include "suites.h"
#include "tp.h"

int main(void)
{
	SRunner *sr;
	int failed;

	tp_log_threshold = TP_LOG_WARN;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	sr = srunner_create(suite_cupti());
	srunner_add_suite(sr, suite_cupti_ondemand());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
