/* report_json: a bpf-verify report as one JSON object for a program
 * (bpf-verify --json). */
#pragma once

struct json_object;
struct verify_report;

/* The report as one JSON object: verdict, exit code, per-CPU offenders,
 * counts. Caller puts it. -ENOMEM. */
int verify_report_json(const struct verify_report *r, struct json_object **ret);
