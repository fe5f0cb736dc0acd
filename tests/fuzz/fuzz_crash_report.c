/*
 * fuzz_crash_report.c - libFuzzer target for launcher/crashes/crash_report.c,
 * which reads the crash report the app's runtime wrote into the shared dumps
 * volume (the app's bytes, not ours): whatever the bytes, parsing ends, and
 * every field it gives is a NUL-terminated string within the caps.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/crashes/crash_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct crash_report r;
	struct err_msg em;

	if (crash_report_parse((const char *)data, size, &r, &em) != 0)
		return 0;
	if (r.n_frames > CRASH_REPORT_FRAMES || (r.process && strlen(r.process) > 1024) ||
	    (r.exc_type && strlen(r.exc_type) > 1024))
		abort();
	for (size_t i = 0; i < r.n_frames; i++)
		if (strlen(r.frames[i]) > 2049)
			abort();
	crash_report_free(&r);
	return 0;
}
