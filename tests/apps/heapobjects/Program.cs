// heapobjects [N]: holds N (default 2,000,000) Node objects in a linked list,
// every tenth with a string, prints "READY <pid>" and waits for SIGTERM.
using System.Globalization;

sealed class Node
{
    public Node? Next;
    public string? Label;
    public long Value;
}

static class Program
{
    static Node? Head;

    static int Main(string[] args)
    {
        int n = args.Length > 0 ? int.Parse(args[0], CultureInfo.InvariantCulture) : 2_000_000;
        for (int i = 0; i < n; i++)
            Head = new Node { Next = Head, Value = i, Label = i % 10 == 0 ? i.ToString(CultureInfo.InvariantCulture) : null };
        using var done = new ManualResetEventSlim();
        AppDomain.CurrentDomain.ProcessExit += (_, _) => done.Set();
        Console.WriteLine($"READY {Environment.ProcessId}");
        done.Wait();
        GC.KeepAlive(Head);
        return 0;
    }
}
