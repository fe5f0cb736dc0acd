// console - the plain .NET app diagport's tests launch and attach to.
//
// The first statement of Main prints "MAIN <pid> <unix time in ms>", so a
// test can measure how long the runtime took to reach managed code (and see
// that a suspended runtime has not reached it). Then it prints "READY <pid>"
// and, by its arguments:
//   sleep N   sleeps N seconds, exits 0
//   exit N    exits with code N at once
//   signal    waits for SIGTERM, prints "SIGTERM", exits 0
//   (none)    sleeps until killed
// Bad arguments: a usage line on stderr, exit 2.

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
        if (!ParseArgs(args, out string mode, out int n))
        {
            Console.Error.WriteLine("usage: console [sleep N | exit N | signal]");
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
        default:
            Thread.Sleep(Timeout.Infinite);
            return 0;
        }
    }

    // Sets mode ("" for none) and n; false on anything else.
    static bool ParseArgs(string[] args, out string mode, out int n)
    {
        mode = args.Length > 0 ? args[0] : "";
        n = 0;
        switch (mode)
        {
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

    static void Allocate()
    {
        for (int i = 0; i < 256; i++)
        {
            Kept.Add(new byte[1024]);
            Kept.Add("kept-" + i.ToString(CultureInfo.InvariantCulture));
        }
    }
}
