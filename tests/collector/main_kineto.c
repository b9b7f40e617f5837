/*
 * main_kineto.c: the runner of the Kineto daemon suite (collector/kineto.c
 * against tests/collector/fake_kineto.c); no GPU, no PyTorch.
 */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(suite_kineto());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
