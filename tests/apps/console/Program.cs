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
//   spin [T]  T threads (default 1, at most 8) run Program.Spin, a managed
//             hot loop that allocates nothing and calls nothing, until killed
//   alloc     Program.Churn allocates small arrays and drops them, in a
//             loop, until killed; every array escapes into a ring, so none
//             is allocated on the stack and gen0 collections keep coming
//             (run with DOTNET_gcServer=0 DOTNET_gcConcurrent=0 the GC runs on
//             this thread; with DOTNET_GCName=libclrgc.so all of it in that
//             library)
//   syscalls  Program.Sys writes 1 byte to /dev/null through a FileStream
//             with no buffer, in a loop, until killed: one pwrite(2) each
//   native L  Program.Native calls dp_native_run of the C library at path L
//             (tests/apps/dpnative: its hot function dp_native_spin is
//             hidden, so in .symtab alone) through P/Invoke, until killed
//   mix L     one thread, round after round, runs Program.MixA for 40 units
//             of work, MixB 25, MixC 15, dp_native_spin (library L) 12, MixD 8
//             (a unit: 2^20 turns of the same loop, about 1.4 ms): a profile
//             of known shares of CPU time
//   throw [R] every 100 ms (or R rounds a second, R up to 100000: the
//             benchmark's rate) runs a round k (from 1): Program.Thrower
//             throws InvalidOperationException("inner k"), Program.Wrap
//             catches it and throws ApplicationException("outer k") with it
//             as the inner exception, Main's loop catches that. After each
//             100th round (and the first) it prints "ROUND k". On SIGHUP a
//             background thread ("crasher") throws
//             InvalidOperationException("crash on a background thread")
//             from Program.Crash, unhandled: the runtime ends the process
//             (SIGABRT), writing a crash dump when DOTNET_DbgEnableMiniDump
//             says so. Runs until killed.
//   throwwork R [T]  the rounds of throw at R a second on the main thread
//             (no ROUND lines), and T threads (default: one per processor,
//             at most 8) running Program.Work, counted units of CPU work
//             (2^16 turns of a loop, ~0.1 ms each); every second a thread
//             ("report") prints "WORK <monotonic ms> <units> <rounds>", the
//             totals so far: the app's work rate while it throws at a fixed
//             rate (bench/exceptions.sh). Runs until killed.
//   (none)    sleeps until killed
// The spin, alloc, syscalls, native, mix, throw and work methods are NoInlining, so that
// each is a frame of its own under a stable name.
// Bad arguments: a usage line on stderr, exit 2.

using System.Diagnostics;
using System.Globalization;
using System.Reflection;
using System.Runtime.CompilerServices;
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
            Console.Error.WriteLine("usage: console [sleep N | exit N | signal | tick N [GAP_MS] | spin [THREADS] | " +
                "alloc | syscalls | native LIB | mix LIB | throw [RATE] | throwwork RATE [THREADS]]");
            return 2;
        }
        if (mode == "native" || mode == "mix")
            NativeLib = args[1];

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
        if (mode == "spin")
            for (int i = 0; i < n; i++)
                new Thread(() => Spin()) { IsBackground = true, Name = "spin" }.Start();
        if (mode == "native" || mode == "mix")
            NativeLibrary.SetDllImportResolver(typeof(Program).Assembly, Resolve);
        Console.WriteLine("READY " + Environment.ProcessId);

        switch (mode)
        {
        case "spin":
            Thread.Sleep(Timeout.Infinite);
            return 0;
        case "alloc":
            Churn();
            return 0;
        case "syscalls":
            Sys();
            return 0;
        case "native":
            Native();
            return 0;
        case "mix":
            Mix();
            return 0;
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
        case "throw":
            Throw(n);
            return 0;
        case "throwwork":
            ThrowWork(n, gapMs);
            return 0;
        default:
            Thread.Sleep(Timeout.Infinite);
            return 0;
        }
    }

    // Sets mode ("" for none), n and gapMs (tick's gap, throwwork's threads); false on anything else.
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
        case "alloc":
        case "syscalls":
            return args.Length <= 1;
        case "throw":
            n = 10;
            return args.Length == 1 || (args.Length == 2 && int.TryParse(args[1], NumberStyles.None,
                CultureInfo.InvariantCulture, out n) && n >= 1 && n <= 100_000);
        case "throwwork":
            gapMs = Math.Min(Environment.ProcessorCount, 8);
            return (args.Length == 2 || args.Length == 3) &&
                int.TryParse(args[1], NumberStyles.None, CultureInfo.InvariantCulture, out n) &&
                n >= 1 && n <= 100_000 &&
                (args.Length == 2 || (int.TryParse(args[2], NumberStyles.None,
                    CultureInfo.InvariantCulture, out gapMs) && gapMs >= 1 && gapMs <= 8));
        case "spin":
            n = 1;
            return args.Length == 1 || (args.Length == 2 && int.TryParse(args[1], NumberStyles.None,
                CultureInfo.InvariantCulture, out n) && n >= 1 && n <= 8);
        case "native":
        case "mix":
            return args.Length == 2 && args[1].Length > 0;
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

    // Rounds of a caught exception wrapping another, perSecond of them a
    // second (paced by the clock, not by sleeping after each), until killed;
    // SIGHUP starts the crash.
    static void Throw(int perSecond)
    {
        using var reg = PosixSignalRegistration.Create(PosixSignal.SIGHUP, ctx =>
        {
            ctx.Cancel = true;
            new Thread(() => Crash()) { IsBackground = true, Name = "crasher" }.Start();
        });
        long start = Stopwatch.GetTimestamp();
        for (long k = 1; ; k++)
        {
            try
            {
                Wrap(k);
            }
            catch (ApplicationException)
            {
            }
            if (k == 1 || k % 100 == 0)
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"ROUND {k}"));
            long due = start + k * Stopwatch.Frequency / perSecond;
            long wait = (due - Stopwatch.GetTimestamp()) * 1000 / Stopwatch.Frequency;
            if (wait > 0)
                Thread.Sleep((int)wait);
        }
    }

    // The work and the rounds done so far, read by the reporter.
    static readonly long[] WorkDone = new long[8 * 16]; // each thread's count on a cache line of its own
    static long RoundsDone;

    // throw's rounds at perSecond, without ROUND lines and without the crash, beside `threads` threads of
    // counted work and a reporter: what the work threads get done is what the throwing (and whatever
    // watches it) leaves them of the machine. Counted, not timed, as Mix is.
    static void ThrowWork(int perSecond, int threads)
    {
        for (int i = 0; i < threads; i++)
        {
            int slot = i * 16;
            new Thread(() => Work(slot)) { IsBackground = true, Name = "work" }.Start();
        }
        new Thread(() =>
        {
            long next = Stopwatch.GetTimestamp();
            for (;;)
            {
                next += Stopwatch.Frequency;
                long wait = (next - Stopwatch.GetTimestamp()) * 1000 / Stopwatch.Frequency;
                if (wait > 0)
                    Thread.Sleep((int)wait);
                long units = 0;
                for (int i = 0; i < WorkDone.Length; i += 16)
                    units += Volatile.Read(ref WorkDone[i]);
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture,
                    $"WORK {MonotonicMs(Stopwatch.GetTimestamp()):F3} {units} {Volatile.Read(ref RoundsDone)}"));
            }
        }) { IsBackground = true, Name = "report" }.Start();
        long start = Stopwatch.GetTimestamp();
        for (long k = 1; ; k++)
        {
            try
            {
                Wrap(k);
            }
            catch (ApplicationException)
            {
            }
            Volatile.Write(ref RoundsDone, k);
            long due = start + k * Stopwatch.Frequency / perSecond;
            long wait = (due - Stopwatch.GetTimestamp()) * 1000 / Stopwatch.Frequency;
            if (wait > 0)
                Thread.Sleep((int)wait);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Work(int slot)
    {
        ulong x = 1;
        for (;;)
        {
            for (int i = 0; i < 1 << 16; i++)
                x = x * 6364136223846793005UL + 1442695040888963407UL;
            Sink += x;
            Volatile.Write(ref WorkDone[slot], WorkDone[slot] + 1);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Wrap(long k)
    {
        try
        {
            Thrower(k);
        }
        catch (InvalidOperationException e)
        {
            throw new ApplicationException(string.Create(CultureInfo.InvariantCulture, $"outer {k}"), e);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Thrower(long k) =>
        throw new InvalidOperationException(string.Create(CultureInfo.InvariantCulture, $"inner {k}"));

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Crash() => throw new InvalidOperationException("crash on a background thread");

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

    // ---- hot code for CPU profiles (spin, alloc, syscalls, native, mix) ----

    static string NativeLib = "";
    static ulong Sink; // results land here, so that no loop is optimised away
    static readonly object?[] Ring = new object?[4096];

    static IntPtr Resolve(string name, Assembly asm, DllImportSearchPath? path) =>
        name == "dpnative" ? NativeLibrary.Load(NativeLib) : IntPtr.Zero;

    [DllImport("dpnative")]
    static extern ulong dp_native_run(ulong n);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Spin()
    {
        ulong x = 1;
        for (;;)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Churn()
    {
        for (long i = 0; ; i++)
            Ring[i & (Ring.Length - 1)] = new long[4 + (i & 7)];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Sys()
    {
        using var fs = new FileStream("/dev/null", FileMode.Open, FileAccess.Write, FileShare.ReadWrite, 0);
        byte[] one = { 1 };
        for (;;)
            fs.Write(one, 0, 1);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Native()
    {
        for (;;)
            Sink += dp_native_run(1_000_000);
    }

    // The mix's work is counted in units of 2^20 turns of the loop (about 1.4 ms here), not timed: a
    // profile samples a thread's CPU time, and a thread preempted in the middle of a timed part would give
    // that part less of it, differently in every run; counted, each part has the same share of CPU time
    // whatever else the machine does, so two profilers sampling at different moments agree. Each MixX has
    // the loop written out, not shared, so that the time is its own and no inlining decision can move it.
    const int Unit = 1 << 20;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MixA(int units)
    {
        ulong x = 1;
        for (long i = (long)units * Unit; i > 0; i--)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        Sink += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MixB(int units)
    {
        ulong x = 1;
        for (long i = (long)units * Unit; i > 0; i--)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        Sink += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MixC(int units)
    {
        ulong x = 1;
        for (long i = (long)units * Unit; i > 0; i--)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        Sink += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MixD(int units)
    {
        ulong x = 1;
        for (long i = (long)units * Unit; i > 0; i--)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        Sink += x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Mix()
    {
        for (;;)
        {
            MixA(40);
            MixB(25);
            MixC(15);
            for (int i = 0; i < 12; i++)
                Sink += dp_native_run(Unit);
            MixD(8);
        }
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
