# Sourced by test/run.sh and test/bench/run.sh: lets the calling shell, and so
# everything it starts, run on every online CPU. The suites place their own
# tasks on chosen CPUs and treat the last CPU as a claim's exclusive one; a
# runner its caller pinned (taskset, systemd's CPUAffinity=, a CI agent) would
# run there as an intruder, and since Linux 6.2 (commit da019032819a, "sched:
# Enforce user requested affinity") a task's own mask also narrows what joining
# a cpuset cgroup gives it and its children.
all_cpus_online=$(cat /sys/devices/system/cpu/online 2>/dev/null || echo "")
if [ -n "$all_cpus_online" ] && command -v taskset >/dev/null 2>&1; then
	if ! taskset -a -p -c "$all_cpus_online" $$ >/dev/null 2>&1; then
		echo "note: could not widen this runner to CPUs $all_cpus_online:" \
			"tests that place tasks on CPUs may see it as an intruder" >&2
	fi
fi
unset all_cpus_online
