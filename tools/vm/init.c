// SPDX-License-Identifier: Apache-2.0
/* PID 1 of the test VM (tools/vm.sh): mounts what a node has, runs one
 * program, reports it on the console and powers the machine off.
 *
 * The initramfs tools/vm.sh builds holds this init, the program and the
 * libraries it links, and two files:
 *   /run.argv   the program's arguments, one per line (the first is the program)
 *   /run.env    NAME=value lines added to its environment
 * The program's stdout and stderr go to files; when it ends, the console gets
 *   @@vm-stdout@@ <its stdout> @@vm-stderr@@ <its stderr> @@vm-exit N@@
 * each marker on a line of its own, so that what the kernel prints on the
 * same console before cannot be taken for the program's output. N is its exit
 * status, or 128 + the signal that ended it.
 *
 * The mounts are a hybrid node's (the development machine's layout): cgroup v1
 * controllers under /sys/fs/cgroup, cgroup2 at /sys/fs/cgroup/unified, and
 * bpffs, tracefs and debugfs where the kernel documents them. With
 * "vm.cgroup=v2" on the kernel's command line (VM_APPEND), a unified node's:
 * cgroup2 alone at /sys/fs/cgroup.
 *
 * Hand-written, not a shell script: the initramfs carries no shell, and a
 * static init has no library to find before / is set up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARGS_MAX 64

static void say(const char *fmt, const char *what, int err)
{
	fprintf(stderr, fmt, what, strerror(err));
}

/* mkdir -p of one level below an existing directory, then the mount. */
static int mount_at(const char *src, const char *dir, const char *type, const char *opts)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		say("vminit: mkdir %s: %s\n", dir, errno);
		return -1;
	}
	if (mount(src, dir, type, MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
		say("vminit: mount %s: %s\n", dir, errno);
		return -1;
	}
	return 0;
}

/* Whether the kernel's command line holds word (the kernel passes an
 * unknown dotted option on to nobody, so init reads it there). */
static int cmdline_has(const char *word)
{
	char buf[4096], *at;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	for (at = strstr(buf, word); at; at = strstr(at + 1, word))
		if ((at == buf || at[-1] == ' ') && strchr(" \n", at[strlen(word)]))
			return 1;
	return 0;
}

static void mount_node(void)
{
	static const char *const v1[] = { "cpuset", "cpu,cpuacct", "memory", "pids", "freezer" };
	char dir[64];

	mount_at("proc", "/proc", "proc", NULL);
	mount_at("sysfs", "/sys", "sysfs", NULL);
	if (mkdir("/dev", 0755) < 0 && errno != EEXIST)
		say("vminit: mkdir %s: %s\n", "/dev", errno);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL) < 0)
		say("vminit: mount %s: %s\n", "/dev", errno);
	mount_at("tmpfs", "/tmp", "tmpfs", "mode=1777");
	if (mkdir("/var", 0755) < 0 && errno != EEXIST)
		say("vminit: mkdir %s: %s\n", "/var", errno);
	mount_at("tmpfs", "/var/tmp", "tmpfs", "mode=1777");
	mount_at("tmpfs", "/run", "tmpfs", "mode=755");
	mount_at("tmpfs", "/dev/shm", "tmpfs", "mode=1777");
	mount_at("bpf", "/sys/fs/bpf", "bpf", "mode=700");
	mount_at("debugfs", "/sys/kernel/debug", "debugfs", NULL);
	mount_at("tracefs", "/sys/kernel/tracing", "tracefs", NULL);
	if (cmdline_has("vm.cgroup=v2")) { /* a unified node's: cgroup2 alone */
		mount_at("cgroup2", "/sys/fs/cgroup", "cgroup2", NULL);
		return;
	}
	mount_at("tmpfs", "/sys/fs/cgroup", "tmpfs", "mode=755");
	for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]); i++) {
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", v1[i]);
		mount_at("cgroup", dir, "cgroup", v1[i]);
	}
	mount_at("cgroup2", "/sys/fs/cgroup/unified", "cgroup2", NULL);
}

/* The lines of path, each NUL-terminated in place, into v (at most n - 1,
 * then NULL). The buffer is the caller's to keep. */
static int read_lines(const char *path, char *buf, size_t size, char **v, int n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), k = 0;
	ssize_t len;

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	len = read(fd, buf, size - 1);
	close(fd);
	if (len < 0)
		return -1;
	buf[len] = 0;
	for (char *line = buf, *nl; *line && k < n - 1; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		v[k++] = line;
		if (!nl)
			break;
	}
	v[k] = NULL;
	return k;
}

/* The file's bytes to the console, as they are. */
static void copy_out(const char *path, int out)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			break;
	close(fd);
}

static int run(char **argv)
{
	int status, out, err;
	pid_t pid = fork();

	if (pid < 0)
		return 125;
	if (pid == 0) {
		out = open("/tmp/vm.stdout", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		err = open("/tmp/vm.stderr", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
			_exit(125);
		if (chdir("/project") < 0)
			_exit(125);
		execv(argv[0], argv);
		fprintf(stderr, "vminit: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 125;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void)
{
	static char argbuf[16384], envbuf[16384];
	char *argv[ARGS_MAX], *envv[ARGS_MAX];
	int console, rc = 125, n;
	char line[64];

	mount_node();
	console = open("/dev/console", O_WRONLY | O_CLOEXEC);
	if (console < 0)
		console = 2;
	n = read_lines("/run.env", envbuf, sizeof(envbuf), envv, ARGS_MAX);
	for (int i = 0; i < n; i++)
		putenv(envv[i]);
	setenv("PATH", "/usr/bin:/bin", 0);
	if (read_lines("/run.argv", argbuf, sizeof(argbuf), argv, ARGS_MAX) > 0)
		rc = run(argv);
	else
		fprintf(stderr, "vminit: no /run.argv\n");
	sync();
	dprintf(console, "\n@@vm-stdout@@\n");
	copy_out("/tmp/vm.stdout", console);
	dprintf(console, "\n@@vm-stderr@@\n");
	copy_out("/tmp/vm.stderr", console);
	snprintf(line, sizeof(line), "\n@@vm-exit %d@@\n", rc);
	if (write(console, line, strlen(line)) < 0)
		rc = 125;
	sync();
	reboot(RB_POWER_OFF);
	return rc;
}
