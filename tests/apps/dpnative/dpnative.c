/*
 * dpnative.c - the native code of the console test app's native and mix
 * modes (tests/apps/console): a library whose hot function a CPU profile must
 * name. tests/integration/perf_profile.sh builds it with gcc, strips it and
 * keeps its symbols in a separate debug file (or in none).
 *
 * dp_native_spin is hidden: it is in .symtab only, never in .dynsym, so a
 * stripped copy has no name for it and only a debug file (found by build id
 * or .gnu_debuglink) names it. dp_native_run, the exported entry the app
 * calls through P/Invoke, stays named by .dynsym. Built with
 * -fno-omit-frame-pointer, so that a call chain walks through both; but
 * Debian's gcc 12 keeps no frame in a leaf function whatever the options
 * (-mno-omit-leaf-frame-pointer included), and without one the chain of a
 * sample in dp_native_spin skips dp_native_run: so dp_native_spin calls
 * dp_native_seed first, once, and is no leaf.
 */
#include <stdint.h>

__attribute__((noinline, noclone, visibility("hidden"))) uint64_t dp_native_seed(uint64_t n)
{
	__asm__ volatile("" : "+r"(n)); /* nothing the compiler can fold into the caller */
	return n | 1;
}

__attribute__((noinline, noclone, visibility("hidden"))) uint64_t dp_native_spin(uint64_t n)
{
	uint64_t x = dp_native_seed(n);

	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

/* n rounds of dp_native_spin's loop; not a tail call, so that this frame stays on the stack */
uint64_t dp_native_run(uint64_t n)
{
	return dp_native_spin(n) + 1;
}
