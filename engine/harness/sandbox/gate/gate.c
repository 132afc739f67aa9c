/*
 * oecp-gate: the start gate of an agent's sandbox, for x86-64 Linux.
 *
 *   oecp-gate FD UID PROGRAM [ARG...]
 *
 * FD is 3 or above.
 * It reads descriptor FD up to a newline. Unless that line is "go" (and
 * the newline came), it exits 125 having run nothing: end of file is what
 * a server that died during the sandbox's setup leaves behind. It closes
 * FD and every descriptor above it, then, unless UID is "-", takes UID
 * (not 0) as its user, group and only
 * group, with no capabilities: it sets no_new_privs, drops every
 * capability from the bounding and ambient sets, clears the inheritable
 * set, and sets its groups, then its real, effective and saved group and
 * user IDs (as setpriv --reuid=UID --regid=UID --clear-groups
 * --inh-caps=-all --bounding-set=-all --no-new-privs does). It then
 * executes PROGRAM (a path, not searched for) with ARG..., in its
 * environment; a PROGRAM the kernel cannot execute for its format (a
 * script without "#!") runs under /bin/sh, as execvp would run it.
 *
 * Exit statuses when PROGRAM did not start: 125 the gate stayed closed,
 * or the identity could not be taken (with a line on standard error);
 * 127 PROGRAM (or its interpreter) was not found, 126 it could not be
 * executed (with a line on standard error that names PROGRAM and why).
 *
 * It is one small static executable without libc, so that the sandbox
 * pays one cheap exec for what took a shell and setpriv. build.sh builds
 * it; the server embeds the result.
 */
typedef unsigned int u32;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}
#define sys(n, a, b, c) sys6(n, a, b, c, 0, 0, 0)
#define prctl(op, arg) sys6(SYS_prctl, op, arg, 0, 0, 0, 0)

enum {
	SYS_read = 0,
	SYS_write = 1,
	SYS_close = 3,
	SYS_execve = 59,
	SYS_setgroups = 116,
	SYS_setresuid = 117,
	SYS_setresgid = 119,
	SYS_capget = 125,
	SYS_capset = 126,
	SYS_prctl = 157,
	SYS_exit_group = 231,
	SYS_prlimit64 = 302,
	SYS_close_range = 436,

	EPERM = 1,
	ENOENT = 2,
	EINTR = 4,
	EBADF = 9,
	E2BIG = 7,
	ENOEXEC = 8,
	ENOMEM = 12,
	EACCES = 13,
	ENOTDIR = 20,
	EISDIR = 21,
	EINVAL = 22,
	ETXTBSY = 26,
	ENAMETOOLONG = 36,
	ELOOP = 40,
	ENOSYS = 38,

	RLIMIT_NOFILE = 7,

	PR_CAPBSET_DROP = 24,
	PR_SET_NO_NEW_PRIVS = 38,
	PR_CAP_AMBIENT = 47,
	PR_CAP_AMBIENT_CLEAR_ALL = 4,

	LINUX_CAPABILITY_VERSION_3 = 0x20080522,
};

static __attribute__((noreturn)) void quit(int code)
{
	for (;;)
		sys(SYS_exit_group, code, 0, 0);
}

static void say(const char *s)
{
	long n = 0;
	while (s[n])
		n++;
	sys(SYS_write, 2, (long)s, n);
}

/* fail writes "oecp-gate: " what [detail] [": " why] to standard error
 * and exits. */
static __attribute__((noreturn)) void failWhy(int code, const char *what, const char *detail, const char *why)
{
	say("oecp-gate: ");
	say(what);
	if (detail) {
		say(" ");
		say(detail);
	}
	if (why) {
		say(": ");
		say(why);
	}
	say("\n");
	quit(code);
}
#define fail(code, what, detail) failWhy(code, what, detail, 0)

/* reason is the C library's text for an exec error, or 0. */
static const char *reason(long err)
{
	switch (err) {
	case EPERM: return "Operation not permitted";
	case ENOENT: return "No such file or directory";
	case E2BIG: return "Argument list too long";
	case ENOEXEC: return "Exec format error";
	case ENOMEM: return "Cannot allocate memory";
	case EACCES: return "Permission denied";
	case ENOTDIR: return "Not a directory";
	case EISDIR: return "Is a directory";
	case EINVAL: return "Invalid argument";
	case ETXTBSY: return "Text file busy";
	case ENAMETOOLONG: return "File name too long";
	case ELOOP: return "Too many levels of symbolic links";
	}
	return "cannot execute it";
}

/* number is the decimal s (at most 10 digits), or -1. */
static long number(const char *s)
{
	long v = 0;
	int n = 0;
	for (; *s; s++, n++) {
		if (*s < '0' || *s > '9' || n == 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return n ? v : -1;
}

struct caphdr {
	u32 version;
	int pid;
};
struct capdata {
	u32 effective, permitted, inheritable;
};

/* become takes id as every user and group ID, with no capabilities. */
static void become(long id)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1) != 0)
		fail(125, "cannot set no_new_privs", 0);
	for (long cap = 0; cap < 64; cap++) {
		long r = prctl(PR_CAPBSET_DROP, cap);
		if (r != 0 && r != -EINVAL) /* EINVAL: past the last capability */
			fail(125, "cannot drop a capability from the bounding set", 0);
	}
	long r = sys6(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0);
	if (r != 0 && r != -EINVAL) /* EINVAL: a kernel without ambient capabilities */
		fail(125, "cannot clear the ambient capabilities", 0);
	struct caphdr h = {LINUX_CAPABILITY_VERSION_3, 0};
	struct capdata d[2];
	if (sys(SYS_capget, (long)&h, (long)d, 0) != 0)
		fail(125, "cannot read its capabilities", 0);
	d[0].inheritable = d[1].inheritable = 0;
	if (sys(SYS_capset, (long)&h, (long)d, 0) != 0)
		fail(125, "cannot clear the inheritable capabilities", 0);
	if (sys(SYS_setgroups, 0, 0, 0) != 0)
		fail(125, "cannot clear the supplementary groups", 0);
	if (sys(SYS_setresgid, id, id, id) != 0)
		fail(125, "cannot take the group ID", 0);
	if (sys(SYS_setresuid, id, id, id) != 0)
		fail(125, "cannot take the user ID", 0);
}

/* closeFrom closes every descriptor from fd on: the gate's own, and any
 * the server inherited without close-on-exec, which would otherwise reach
 * the agent (those below fd are the program's own, the server's dup2s). */
static void closeFrom(long fd)
{
	long r = sys(SYS_close_range, fd, ~0U, 0);
	if (r == 0)
		return;
	if (r != -ENOSYS && r != -EINVAL)
		quit(125);
	/* Before Linux 5.9: one by one, up to the descriptor limit. */
	unsigned long lim[2] = {1024, 1024};
	if (sys6(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)lim, 0, 0) != 0 || lim[0] > 1 << 20)
		lim[0] = 1 << 20;
	for (unsigned long d = fd; d < lim[0]; d++) {
		r = sys(SYS_close, d, 0, 0);
		if (r != 0 && r != -EBADF && r != -EINTR)
			quit(125);
	}
}

__attribute__((used)) void entry(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	if (argc < 4)
		fail(125, "usage: oecp-gate FD UID PROGRAM [ARG...]", 0);
	long fd = number(argv[1]);
	if (fd < 3) /* above standard input, output and error */
		fail(125, "not a descriptor:", argv[1]);
	char got[2];
	int n = 0;
	for (;;) {
		char c;
		long r = sys(SYS_read, fd, (long)&c, 1);
		if (r == -EINTR)
			continue;
		if (r != 1)
			quit(125);
		if (c == '\n')
			break;
		if (n == 2)
			quit(125);
		got[n++] = c;
	}
	if (n != 2 || got[0] != 'g' || got[1] != 'o')
		quit(125);
	closeFrom(fd);
	if (!(argv[2][0] == '-' && argv[2][1] == 0)) {
		long id = number(argv[2]);
		if (id <= 0 || id > 0xfffffffeL) /* 0 is root; -1 would leave an ID as it was */
			fail(125, "not a user ID:", argv[2]);
		become(id);
	}
	long r = sys(SYS_execve, (long)argv[3], (long)(argv + 3), (long)envp);
	if (r == -ENOEXEC) {
		/* A script without "#!": the shell runs it, as execvp would. */
		argv[2] = "/bin/sh";
		r = sys(SYS_execve, (long)argv[2], (long)(argv + 2), (long)envp);
	}
	failWhy(r == -ENOENT ? 127 : 126, "cannot execute", argv[3], reason(-r));
}

/* The kernel starts a process with its stack pointer at argc. */
__asm__(".globl _start\n"
	"_start:\n"
	"\tmov %rsp, %rdi\n"
	"\tand $-16, %rsp\n"
	"\tcall entry\n"
	"\thlt\n");
