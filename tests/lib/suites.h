/*
 * suites.h: every suite, one per file (tests/<component>/check_<module>.c, or
 * check_<module>_<part>.c where a module's tests are split by concern).
 */
#ifndef SUITES_H
#define SUITES_H

#include <check.h>

Suite *suite_sha256(void);
Suite *suite_num(void);
Suite *suite_jtok(void);
Suite *suite_inflate(void);
Suite *suite_trace(void);
Suite *suite_ingest(void);
Suite *suite_routes(void);
Suite *suite_evpack(void);
Suite *suite_store(void);
Suite *suite_alloc(void);
Suite *suite_analysis(void);
Suite *suite_analysis_pytorch(void);
Suite *suite_analysis_spill(void);
Suite *suite_timeline(void);
Suite *suite_snapshot(void);
Suite *suite_stats(void);
Suite *suite_runline(void);
Suite *suite_textfmt(void);
Suite *suite_canary(void);
Suite *suite_upload(void);
Suite *suite_bad_input(void);
Suite *suite_analysis_api(void);
Suite *suite_compare(void);
Suite *suite_collect(void);
Suite *suite_collect_watch(void);
Suite *suite_collect_run(void);
Suite *suite_collect_capture(void);
Suite *suite_api_contract(void);
Suite *suite_runs(void);
Suite *suite_runs_chunks(void);
Suite *suite_runs_derive(void);
Suite *suite_distributed(void);
Suite *suite_formats(void);
Suite *suite_gpu(void);
Suite *suite_overlap(void);
Suite *suite_captures(void);
Suite *suite_cupti(void);
Suite *suite_cupti_ondemand(void);
Suite *suite_kineto(void);

#endif
