// A .NET Core 3.1 app for diagport's tests: prints "READY <pid>", then
// sleeps the given seconds (default 60) and exits 0.
using System;
using System.Threading;

static class Program
{
    static int Main(string[] args)
    {
        int seconds = args.Length > 0 ? int.Parse(args[0]) : 60;
        Console.WriteLine("READY " + System.Diagnostics.Process.GetCurrentProcess().Id);
        Console.Out.Flush();
        Thread.Sleep(seconds * 1000);
        return 0;
    }
}
