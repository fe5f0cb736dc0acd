// console - the plain .NET app diagport's tests launch and attach to.
//
// The first statement of Main prints "MAIN <pid> <unix time in ms>", so a
// test can measure how long the runtime took to reach managed code (and see
// that a suspended runtime has not reached it). Then it prints "READY <pid>"
// and, by its arguments:
//   sleep N   sleeps N seconds, exits 0
//   exit N    exits with code N at once
//   signal    waits for SIGTERM, prints "SIGTERM", exits 0
//   tick N [G] keeps N MB of heap reachable (allocated before READY), then
//             runs a thread that reads the monotonic clock about every 1 ms
//             and, whenever a gap of over G ms (default 50) between two reads
//             ends, prints "GAP <ms> <start> <end>" (start and end in ms of
//             CLOCK_MONOTONIC, the clock Stopwatch reads on Linux). A dump
//             stops every thread, so the gap it leaves is the app's freeze
//             (bench/transport.sh). Before READY it prints
//             "TICK <N> MB <monotonic ms now>". Runs until killed.
//   (none)    sleeps until killed
// Bad arguments: a usage line on stderr, exit 2.

using System.Diagnostics;
using System.Globalization;
using System.Runtime.InteropServices;

namespace DiagportTestConsole;

static class Program
{
    // A little heap that stays reachable, so a dump has objects to show.
    static readonly List<object> Kept = new();

    static int Main(string[] args)
    {
        long ticks = DateTimeOffset.UtcNow.UtcTicks - DateTimeOffset.UnixEpoch.UtcTicks;
        Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
            $"MAIN {Environment.ProcessId} {ticks / 10000}.{ticks % 10000:D4}"));
        Allocate();
        if (!ParseArgs(args, out string mode, out int n, out int gapMs))
        {
            Console.Error.WriteLine("usage: console [sleep N | exit N | signal | tick N [GAP_MS]]");
            return 2;
        }

        // Registered before READY, so a SIGTERM sent on READY is ours.
        using var sigterm = new ManualResetEventSlim();
        using var reg = mode == "signal"
            ? PosixSignalRegistration.Create(PosixSignal.SIGTERM, ctx =>
            {
                ctx.Cancel = true;
                sigterm.Set();
            })
            : null;
        if (mode == "tick")
        {
            Retain(n);
            Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                $"TICK {n} MB {MonotonicMs(Stopwatch.GetTimestamp()):F3}"));
        }
        Console.WriteLine("READY " + Environment.ProcessId);

        switch (mode)
        {
        case "exit":
            return n;
        case "sleep":
            Thread.Sleep(TimeSpan.FromSeconds(n));
            return 0;
        case "signal":
            sigterm.Wait();
            Console.WriteLine("SIGTERM");
            return 0;
        case "tick":
            Tick(gapMs);
            return 0;
        default:
            Thread.Sleep(Timeout.Infinite);
            return 0;
        }
    }

    // Sets mode ("" for none), n and gapMs (tick only); false on anything else.
    static bool ParseArgs(string[] args, out string mode, out int n, out int gapMs)
    {
        mode = args.Length > 0 ? args[0] : "";
        n = 0;
        gapMs = 50;
        switch (mode)
        {
        case "tick":
            return (args.Length == 2 || args.Length == 3) &&
                int.TryParse(args[1], NumberStyles.None, CultureInfo.InvariantCulture, out n) &&
                n <= 100_000 &&
                (args.Length == 2 || (int.TryParse(args[2], NumberStyles.None,
                    CultureInfo.InvariantCulture, out gapMs) && gapMs >= 1));
        case "":
        case "signal":
            return args.Length <= 1;
        case "sleep":
        case "exit":
            return args.Length == 2 && int.TryParse(args[1], NumberStyles.None,
                CultureInfo.InvariantCulture, out n) &&
                n <= (mode == "exit" ? 255 : 1_000_000);
        default:
            return false;
        }
    }

    // Keeps mb MB reachable in 8 KiB arrays (small-object heap, promoted to
    // gen2 by the collection at the end), filled with pseudo-random bytes so
    // every page is really there.
    static void Retain(int mb)
    {
        var rng = new Random(1);
        for (long i = 0; i < (long)mb * 128; i++)
        {
            var a = new byte[8192];
            rng.NextBytes(a);
            Kept.Add(a);
        }
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
    }

    static double MonotonicMs(long ts) => ts * 1000.0 / Stopwatch.Frequency;

    // Never returns. Allocates nothing while no gap is seen, so it causes no GC.
    static void Tick(int gapMs)
    {
        long limit = gapMs * Stopwatch.Frequency / 1000;
        long last = Stopwatch.GetTimestamp();
        var t = new Thread(() =>
        {
            for (;;)
            {
                Thread.Sleep(1);
                long now = Stopwatch.GetTimestamp();
                if (now - last > limit)
                    Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                        $"GAP {MonotonicMs(now - last):F3} {MonotonicMs(last):F3} {MonotonicMs(now):F3}"));
                last = now;
            }
        }) { IsBackground = true, Name = "tick", Priority = ThreadPriority.Highest };
        t.Start();
        Thread.Sleep(Timeout.Infinite);
    }

    static void Allocate()
    {
        for (int i = 0; i < 256; i++)
        {
            Kept.Add(new byte[1024]);
            Kept.Add("kept-" + i.ToString(CultureInfo.InvariantCulture));
        }
    }
}
