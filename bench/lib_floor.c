/*
 * lib_floor.c - an empty program, for bench/agent.sh (issue 3). Linked the way
 * ./diagport is (PIE, -z now) with all of its libraries, and again with fewer,
 * it shows what start-up time and resident memory the libraries alone cost
 * before any of our code runs. With an argument it waits for a signal, so its
 * memory can be read.
 */
#include <unistd.h>

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)
		pause();
	return 0;
}
