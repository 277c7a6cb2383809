/* scan: the static check's walk of /proc. Every <pid>/task/<tid> is read
 * (status, stat and cgroup through lib/fileio and host/procfs) and handed
 * to the report (verify_report_add_thread()), which decides. Only I/O here:
 * what a thread means is report.c's.
 */
#pragma once

struct verify_report;

/* The static check over proc_root (/proc, or a fixture tree). Tasks that
 * vanish meanwhile are skipped; others that cannot be read are counted in
 * r->unreadable. Returns the number of threads scanned, -errno when
 * proc_root cannot be listed, -ENOMEM. */
int verify_report_scan(struct verify_report *r, const char *proc_root);
