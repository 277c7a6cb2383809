/* report_text: a bpf-verify report as text tables for a person. */
#pragma once

#include <stdio.h>

struct verify_report;

/* The whole report: tables per exclusive CPU, the unconfined summary, and
 * the verdict as the last line. */
void verify_report_print(const struct verify_report *r, FILE *f);
