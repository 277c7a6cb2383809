/* fileio: bounded reads to EOF, refusal of every non-regular file before a
 * byte is read (never a hang), the line reader, atomic replace. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/cleanup.h"
#include "lib/errbuf.h"
#include "lib/fileio.h"
#include "testutil.h"

struct fx {
	char dir[64];
	char path[128];
};

static const char *at(struct fx *f, const char *name)
{
	(void)snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	return f->path;
}

static void put(struct fx *f, const char *name, const char *text)
{
	FILE *fp = fopen(at(f, name), "we");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static int setup(void **st)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	(void)snprintf(f->dir, sizeof(f->dir), "/tmp/fileio_test.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	/* A read that blocks would stop the whole suite: make it a failure. */
	alarm(20 * (unsigned)testutil_time_scale()); /* emulators: DRA_CPU_TEST_TIME_SCALE */
	*st = f;
	return 0;
}

static int teardown(void **st)
{
	struct fx *f = *st;
	char cmd[128];

	alarm(0);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* fileio_read() must fail with r and text naming path and containing what. */
static void assert_refused(const char *path, int r, const char *what)
{
	struct errbuf eb = { "" };
	char *text = (char *)"untouched";
	size_t len = 77;

	assert_int_equal(fileio_read(path, 4096, &text, &len, &eb), r);
	assert_string_equal(text, "untouched"); /* *ret written only on success */
	assert_int_equal(len, 77);
	if (!strstr(eb.s, path) || !strstr(eb.s, what))
		fail_msg("%s: error '%s' lacks the path or '%s'", path, eb.s, what);
}

static void test_fileio_read_regular_file(void **st)
{
	struct fx *f = *st;
	char *text = NULL;
	size_t len = 0;

	put(f, "a", "hello\n");
	assert_int_equal(fileio_read(at(f, "a"), 4096, &text, &len, NULL), 0);
	assert_string_equal(text, "hello\n");
	assert_int_equal(len, 6);
	free(text);
	put(f, "empty", "");
	assert_int_equal(fileio_read(at(f, "empty"), 4096, &text, NULL, NULL), 0);
	assert_string_equal(text, "");
	free(text);
}

static void test_fileio_read_cap_is_exact(void **st)
{
	struct fx *f = *st;
	struct errbuf eb = { "" };
	char *text = NULL;
	size_t len;

	put(f, "ten", "0123456789");
	assert_int_equal(fileio_read(at(f, "ten"), 10, &text, &len, &eb), 0);
	assert_int_equal(len, 10);
	free(text);
	text = NULL;
	assert_int_equal(fileio_read(at(f, "ten"), 9, &text, &len, &eb), -E2BIG);
	assert_null(text);
	assert_non_null(strstr(eb.s, "larger than 9 bytes"));
}

static void test_fileio_refuses_fifo_without_hanging(void **st)
{
	struct fx *f = *st;

	assert_int_equal(mkfifo(at(f, "fifo"), 0600), 0);
	/* no writer: a blocking open() would wait forever */
	assert_refused(at(f, "fifo"), -EINVAL, "is a FIFO, not a regular file");
}

static void test_fileio_refuses_socket(void **st)
{
	struct fx *f = *st;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(at(f, "sock")) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_refused(at(f, "sock"), -EINVAL, "is a socket, not a regular file");
}

static void test_fileio_refuses_symlink(void **st)
{
	struct fx *f = *st;
	char target[128];
	struct buf b = BUF_INIT(4096);

	put(f, "target", "secret");
	(void)snprintf(target, sizeof(target), "%s", at(f, "target"));
	assert_int_equal(symlink(target, at(f, "link")), 0);
	assert_refused(at(f, "link"), -ELOOP, "is a symbolic link (not followed)");
	/* kernel files may be reached through a link when the caller says so */
	assert_int_equal(fileio_read_at(AT_FDCWD, at(f, "link"), FILEIO_FOLLOW, &b, NULL), 0);
	assert_string_equal(buf_str(&b), "secret");
	buf_done(&b);
	/* and so are the files the kubelet mounts (a ConfigMap key is a link) */
	{
		char *text = NULL;
		size_t len = 0;

		assert_int_equal(fileio_read_mounted(at(f, "link"), 4096, &text, &len, NULL), 0);
		assert_string_equal(text, "secret");
		assert_int_equal(len, 6);
		free(text);
	}
}

static void test_fileio_refuses_directory(void **st)
{
	struct fx *f = *st;

	assert_int_equal(mkdir(at(f, "dir"), 0700), 0);
	assert_refused(at(f, "dir"), -EISDIR, "is a directory, not a regular file");
}

static void test_fileio_refuses_device_node(void **st)
{
	assert_refused("/dev/null", -EINVAL, "is a character device, not a regular file");
	/* /dev/zero would never reach EOF: refused before the first read */
	assert_refused("/dev/zero", -EINVAL, "is a character device");
}

static void test_fileio_missing_file_names_the_path(void **st)
{
	struct fx *f = *st;

	assert_refused(at(f, "nope"), -ENOENT, "No such file or directory");
}

static void test_fileio_reads_procfs_to_eof(void **st)
{
	struct buf b = BUF_INIT(1 << 20);
	struct stat st_;
	char want[64];

	/* procfs reports size 0: a read that trusted the size would return "" */
	assert_int_equal(stat("/proc/self/status", &st_), 0);
	assert_int_equal(st_.st_size, 0);
	assert_int_equal(fileio_read_at(AT_FDCWD, "/proc/self/status", FILEIO_FOLLOW, &b, NULL), 0);
	(void)snprintf(want, sizeof(want), "\nPid:\t%d\n", (int)getpid());
	assert_non_null(strstr(buf_str(&b), want));
	buf_done(&b);
}

static void test_fileio_procfs_over_cap_is_e2big(void **st)
{
	struct buf b = BUF_INIT(16);
	struct errbuf eb = { "" };

	/* the size hint (0) passes the cap; the bytes read do not */
	assert_int_equal(fileio_read_at(AT_FDCWD, "/proc/self/status", 0, &b, &eb), -E2BIG);
	assert_null(b.ptr);
	assert_string_equal(eb.s, "/proc/self/status: larger than 16 bytes");
}

static void test_fileio_read_at_appends_and_uses_dirfd(void **st)
{
	struct fx *f = *st;
	struct buf b = BUF_INIT(64);
	_cleanup_close_ int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(dfd >= 0);
	put(f, "x", "abc");
	assert_int_equal(buf_add_str(&b, ">"), 0);
	assert_int_equal(fileio_read_at(dfd, "x", 0, &b, NULL), 0);
	assert_string_equal(buf_str(&b), ">abc");
	/* the cap counts what the buffer held already */
	b.max = 5;
	assert_int_equal(fileio_read_at(dfd, "x", 0, &b, NULL), -E2BIG);
	assert_null(b.ptr);
}

struct lines {
	char seen[8][32];
	int n, stop_at;
};

static int on_line(void *ud, char *line)
{
	struct lines *l = ud;

	if (l->n == l->stop_at)
		return l->n == 1 ? -EPROTO : 7;
	(void)snprintf(l->seen[l->n++], sizeof(l->seen[0]), "%s", line);
	return 0;
}

static void test_fileio_read_lines(void **st)
{
	struct fx *f = *st;
	struct lines l = { .stop_at = -1 };

	put(f, "t", "one\n\nthree\nlast-without-newline");
	assert_int_equal(fileio_read_lines(AT_FDCWD, at(f, "t"), 0, 4096, on_line, &l, NULL), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.seen[0], "one");
	assert_string_equal(l.seen[1], "");
	assert_string_equal(l.seen[2], "three");
	assert_string_equal(l.seen[3], "last-without-newline");
	/* a callback's error stops the walk and is the result */
	l = (struct lines){ .stop_at = 1 };
	assert_int_equal(fileio_read_lines(AT_FDCWD, at(f, "t"), 0, 4096, on_line, &l, NULL),
			 -EPROTO);
	assert_int_equal(l.n, 1);
	/* a positive answer stops early and is the result */
	l = (struct lines){ .stop_at = 2 };
	assert_int_equal(fileio_read_lines(AT_FDCWD, at(f, "t"), 0, 4096, on_line, &l, NULL), 7);
	/* an empty file has no lines; a FIFO is refused */
	l = (struct lines){ .stop_at = -1 };
	put(f, "e", "");
	assert_int_equal(fileio_read_lines(AT_FDCWD, at(f, "e"), 0, 4096, on_line, &l, NULL), 0);
	assert_int_equal(l.n, 0);
	assert_int_equal(mkfifo(at(f, "p"), 0600), 0);
	assert_int_equal(fileio_read_lines(AT_FDCWD, at(f, "p"), 0, 4096, on_line, &l, NULL),
			 -EINVAL);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void test_fileio_write_atomic_replaces(void **st)
{
	struct fx *f = *st;
	char *text = NULL;
	struct stat st_;

	assert_int_equal(fileio_write_atomic(f->dir, "s", "v1", 2, 0600), 0);
	assert_int_equal(fileio_write_atomic(f->dir, "s", "version 2", 9, 0600), 0);
	assert_int_equal(fileio_read(at(f, "s"), 100, &text, NULL, NULL), 0);
	assert_string_equal(text, "version 2");
	free(text);
	assert_int_equal(stat(at(f, "s"), &st_), 0);
	assert_int_equal(st_.st_mode & 0777, 0600);
	assert_int_equal(count_entries(f->dir), 1); /* no temp left behind */
	assert_int_equal(fileio_remove(f->dir, "s"), 0);
	assert_int_equal(fileio_remove(f->dir, "s"), 0); /* missing: success */
	assert_int_equal(fileio_mkdir_p(at(f, "a/b/c"), 0700), 0);
	assert_int_equal(fileio_mkdir_p(at(f, "a/b/c"), 0700), 0);
	assert_int_equal(stat(at(f, "a/b/c"), &st_), 0);
	assert_true(S_ISDIR(st_.st_mode));
}

/* Whatever sits at the temp name an older version used (fixed ".s.tmp") is
 * never opened: a FIFO there would block open(O_WRONLY) for good, a device
 * node would be written to and then renamed into place. */
static void test_fileio_write_atomic_never_opens_what_is_planted_at_a_temp_name(void **st)
{
	struct fx *f = *st;
	char *text = NULL;
	struct stat st_;

	assert_int_equal(mkfifo(at(f, ".s.tmp"), 0600), 0);
	assert_int_equal(fileio_write_atomic(f->dir, "s", "new", 3, 0644), 0);
	assert_int_equal(fileio_read(at(f, "s"), 100, &text, NULL, NULL), 0);
	assert_string_equal(text, "new");
	free(text);
	assert_int_equal(lstat(at(f, ".s.tmp"), &st_), 0);
	assert_true(S_ISFIFO(st_.st_mode)); /* left for fileio_remove_stale_temps() */
	assert_int_equal(stat(at(f, "s"), &st_), 0);
	assert_int_equal(st_.st_mode & 0777, 0644);
	assert_int_equal(count_entries(f->dir), 2);
}

/* A FIFO, socket or symlink where the file belongs is replaced, never opened
 * or followed; a directory is -EISDIR and leaves nothing behind. */
static void test_fileio_write_atomic_replaces_what_is_not_a_regular_file(void **st)
{
	struct fx *f = *st;
	char *text = NULL, target[160];
	struct stat st_;

	assert_int_equal(mkfifo(at(f, "fifo"), 0600), 0);
	assert_int_equal(fileio_write_atomic(f->dir, "fifo", "a", 1, 0600), 0);
	assert_int_equal(lstat(at(f, "fifo"), &st_), 0);
	assert_true(S_ISREG(st_.st_mode));

	put(f, "target", "precious");
	(void)snprintf(target, sizeof(target), "%s", at(f, "target"));
	assert_int_equal(symlink(target, at(f, "link")), 0);
	assert_int_equal(fileio_write_atomic(f->dir, "link", "b", 1, 0600), 0);
	assert_int_equal(lstat(at(f, "link"), &st_), 0);
	assert_true(S_ISREG(st_.st_mode));
	assert_int_equal(fileio_read(target, 100, &text, NULL, NULL), 0);
	assert_string_equal(text, "precious");
	free(text);

	assert_int_equal(mkdir(at(f, "dir"), 0700), 0);
	assert_int_equal(fileio_write_atomic(f->dir, "dir", "c", 1, 0600), -EISDIR);
	assert_int_equal(count_entries(f->dir), 4); /* fifo link target dir: no temp */
}

static void test_fileio_remove_stale_temps_removes_only_temp_names(void **st)
{
	struct fx *f = *st;
	char target[160], *text = NULL;
	struct stat st_;

	put(f, "target", "precious");
	(void)snprintf(target, sizeof(target), "%s", at(f, "target"));
	put(f, ".ours-1.json.tmp", "");		/* the fixed name of earlier versions */
	put(f, ".ours-2.json.tmp.Ab12Cd", "");	/* a crash between create and rename */
	assert_int_equal(mkfifo(at(f, ".ours-3.json.tmp.xxxxxx"), 0600), 0);
	assert_int_equal(symlink(target, at(f, ".ours-4.json.tmp.QQQQQQ")), 0);
	assert_int_equal(mkdir(at(f, ".ours-5.json.tmp"), 0700), 0);
	/* not ours, or not a temp name: kept */
	put(f, ".other-1.json.tmp.Ab12Cd", "");
	put(f, "ours-6.json.tmp.Ab12Cd", "");
	put(f, ".ours-7.json.tmp.Ab1", "");
	put(f, ".ours-8.json.tmp.Ab12C!", "");
	put(f, ".ours-9.json", "");
	assert_int_equal(mkdir(at(f, ".ours-10.json.tmp"), 0700), 0);
	put(f, ".ours-10.json.tmp/inside", ""); /* a directory with content stays */

	assert_int_equal(fileio_remove_stale_temps(f->dir, "ours-"), 5);
	assert_int_equal(count_entries(f->dir), 7);
	assert_int_equal(lstat(at(f, ".other-1.json.tmp.Ab12Cd"), &st_), 0);
	assert_int_equal(lstat(at(f, ".ours-10.json.tmp/inside"), &st_), 0);
	assert_int_equal(fileio_read(target, 100, &text, NULL, NULL), 0);
	assert_string_equal(text, "precious");
	free(text);
	/* "" matches every name; a missing directory is empty */
	assert_int_equal(fileio_remove_stale_temps(f->dir, ""), 1);
	assert_int_equal(fileio_remove_stale_temps(at(f, "missing"), ""), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fileio_read_regular_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_read_cap_is_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_refuses_fifo_without_hanging, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fileio_refuses_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_refuses_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_refuses_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_refuses_device_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_missing_file_names_the_path, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fileio_reads_procfs_to_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_procfs_over_cap_is_e2big, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_read_at_appends_and_uses_dirfd, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fileio_read_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_write_atomic_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_fileio_write_atomic_never_opens_what_is_planted_at_a_temp_name, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_fileio_write_atomic_replaces_what_is_not_a_regular_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fileio_remove_stale_temps_removes_only_temp_names,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
