/*
 * crash_report.h - what a runtime's crash report (createdump's
 * NAME.crashreport.json, DOTNET_EnableCrashReport) says of the crash: the
 * process name, the thread that crashed, its managed exception's type and
 * HRESULT, and its managed frames. The file is the app's to write (the
 * dumps volume is shared), so it is read as untrusted: a size cap, every
 * field checked, the first 64 frames.
 */
#ifndef DP_CRASH_REPORT_H
#define DP_CRASH_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define CRASH_REPORT_MAX (16u << 20)
#define CRASH_REPORT_FRAMES 64

struct crash_report {
	char *process;       /* payload.process_name, or NULL */
	uint64_t thread;     /* the crashed thread's native id, 0 when none is marked */
	char *exc_type;      /* its managed_exception_type, or NULL */
	char *hresult;       /* "0x80131509", or NULL */
	char **frames;       /* "console.dll!DiagportTestConsole.Program.Crash()": managed frames, innermost first */
	size_t n_frames;
};

/* Parse a report's bytes. 0 with *out (free with crash_report_free); DP_ESYNTAX or DP_EINVAL with em. */
int crash_report_parse(const char *text, size_t len, struct crash_report *out, struct err_msg *em);
void crash_report_free(struct crash_report *r); /* accepts a zeroed report */

#endif
