// webapp - the ASP.NET Core app diagport's tests attach to.
//
// Each endpoint puts the runtime into a state that a dump, a stack listing or
// a trace should show by name: threads waiting on a lock (LockContention.*),
// a thread burning CPU (HotLoop.Spin), a heap growing with LeakedBuffer
// objects (at once or steadily) or with small LeakedOrder objects. Work is
// started on dedicated threads and the request returns at once, so a test can
// start the state and then attach
// while it lasts. /slow and /status are the other kind: a request that takes
// as long as asked, an answer with the status code asked for (what the
// collection rules' ASP.NET triggers count). /crash kills the process the
// way an unhandled exception does: what the crash-dump settings are for.
//
// It listens on ASPNETCORE_URLS (the tests pass http://127.0.0.1:0: a port the
// system picks) and prints "LISTENING <url>" per address bound, then
// "READY <pid>", on stdout once the server accepts connections.

using System.Runtime.CompilerServices;

var builder = WebApplication.CreateBuilder(args);
// Every level reaches the logging EventSource (/logs filters it there); the
// console only gets warnings and errors: stdout is read by the tests for the
// READY line.
// Test.Scopes (/scoped) reaches the console at Information: its JSON lines,
// scopes included, are the reference /logs is checked against. No activity
// tracking scope (SpanId, TraceId, ParentId): only the console sees it, the
// EventSource never does.
builder.Logging.SetMinimumLevel(LogLevel.Trace);
builder.Logging.AddFilter<Microsoft.Extensions.Logging.Console.ConsoleLoggerProvider>(null, LogLevel.Warning);
builder.Logging.AddFilter<Microsoft.Extensions.Logging.Console.ConsoleLoggerProvider>("Test.Scopes", LogLevel.Information);
builder.Logging.AddJsonConsole(o => o.IncludeScopes = true);
builder.Logging.Configure(o => o.ActivityTrackingOptions = ActivityTrackingOptions.None);
var app = builder.Build();

// Once it listens: "LISTENING <url>" for each address Kestrel bound (the port it was given, or the one the
// system picked for port 0, so a test need not pick a port that another process can take first), then READY.
app.Lifetime.ApplicationStarted.Register(() =>
{
    foreach (var url in app.Urls)
        Console.WriteLine($"LISTENING {url}");
    Console.WriteLine($"READY {Environment.ProcessId}");
});

app.MapGet("/", () => "ok");

app.MapGet("/pid", () => Environment.ProcessId.ToString());

// An unhandled exception on a thread of the app's own, with an inner one: the process dies as the runtime
// makes it die (SIGABRT, after the crash dump and report the crash-dump settings ask for). Answers first.
app.MapGet("/crash", (string? message) =>
{
    var t = new Thread(() =>
    {
        Thread.Sleep(200);
        Crash.Throw(message ?? "crash requested");
    }) { IsBackground = true, Name = "crasher" };
    t.Start();
    return "crashing\n";
});

// The runtime's own GC counts, "gen0 gen1 gen2": what the GC counters are checked against.
app.MapGet("/gc", () => $"{GC.CollectionCount(0)} {GC.CollectionCount(1)} {GC.CollectionCount(2)}\n");

// Every count is capped so a typo cannot take the machine down.
app.MapGet("/blocking-threads", (int? count, int? seconds) =>
{
    int n = count ?? 8, s = seconds ?? 300;
    if (n < 1 || n > 256 || s < 1 || s > 3600)
        return Results.Text("count must be 1..256, seconds 1..3600\n", statusCode: 400);
    LockContention.Start(n, s);
    return Results.Text($"started {n} threads blocked for {s} s\n");
});

app.MapGet("/high-cpu", (int? seconds) =>
{
    int s = seconds ?? 10;
    if (s < 1 || s > 3600)
        return Results.Text("seconds must be 1..3600\n", statusCode: 400);
    HotLoop.Start(s);
    return Results.Text($"spinning for {s} s\n");
});

// count log messages at a level under a category, with a structured argument
// and a scope: what /logs reads back.
app.MapGet("/log", (ILoggerFactory factory, string? category, string? level, int? count, string? message) =>
{
    int n = count ?? 1;
    if (n < 1 || n > 100_000 || !Enum.TryParse<LogLevel>(level ?? "Information", true, out var lvl))
        return Results.Text("count must be 1..100000, level a LogLevel\n", statusCode: 400);
    var logger = factory.CreateLogger(category ?? "Test.Logs");
    using (logger.BeginScope("request {RequestNumber}", 42))
    {
        for (int i = 0; i < n; i++)
            logger.Log(lvl, new EventId(7, "TestEvent"), "test message {Index} {Text}", i, message ?? "hello");
    }
    return Results.Text($"logged {n}\n");
});

// A job whose scopes outlive the thread that opened them: a scope, an await
// that resumes on another thread, a log line, a nested scope, another await
// and log line, the nested scope closed, a third line in the outer scope only,
// and a fourth after both. Each message names the job, so that concurrent
// requests can be told apart. Scope states are lists of key/value pairs (a
// message template, a List): the logging EventSource writes only those as
// the scope's arguments (a Dictionary comes out as {}).
app.MapGet("/scoped", async (ILoggerFactory factory, int? id) =>
{
    var logger = factory.CreateLogger("Test.Scopes");
    int job = id ?? 0;
    using (logger.BeginScope("job {Job}", job))
    {
        await Task.Delay(20).ConfigureAwait(false);
        logger.LogInformation("job {JobId} step {Step}", job, 1);
        using (logger.BeginScope(new List<KeyValuePair<string, object?>> { new("Stage", $"nested-{job}") }))
        {
            await Task.Yield();
            await Task.Delay(10).ConfigureAwait(false);
            logger.LogInformation("job {JobId} step {Step}", job, 2);
        }
        await Task.Delay(10).ConfigureAwait(false);
        logger.LogInformation("job {JobId} step {Step}", job, 3);
    }
    logger.LogInformation("job {JobId} step {Step}", job, 4);
    return Results.Text($"job {job}\n");
});

app.MapGet("/memory-leak", (int? mb) =>
{
    int m = mb ?? 50;
    if (m < 1 || m > 4096)
        return Results.Text("mb must be 1..4096\n", statusCode: 400);
    return Results.Text($"{LeakedBuffer.Retain(m)}\n");
});

// A steady leak: a thread retains mbPerSecond MiB every second for the given
// seconds (what a working-set or GC heap trigger should see cross its
// threshold at a known rate). Returns at once; the running total is in
// /memory-leak's answer (mb=... adds to the same list).
app.MapGet("/leak-start", (int? mbPerSecond, int? seconds) =>
{
    int m = mbPerSecond ?? 10, s = seconds ?? 10;
    if (m < 1 || m > 512 || s < 1 || s > 3600 || (long)m * s > 4096)
        return Results.Text("mbPerSecond must be 1..512, seconds 1..3600, their product at most 4096\n", statusCode: 400);
    LeakedBuffer.StartSteady(m, s);
    return Results.Text($"leaking {m} MiB a second for {s} s\n");
});

// A leak of small objects of a type of its own: count more LeakedOrder objects (64 bytes each, no array
// behind them) kept forever, so that between two GC heap snapshots LeakedOrder is the type that grew most
// in bytes (what `diagport ui`'s heap diff must put first). Returns the total held.
app.MapGet("/leak-objects", (int? count) =>
{
    int n = count ?? 100_000;
    if (n < 1 || n > 10_000_000)
        return Results.Text("count must be 1..10000000\n", statusCode: 400);
    return Results.Text($"{LeakedOrder.Retain(n)}\n");
});

// Answers after ms milliseconds without holding a thread (an await): a slow
// request as ASP.NET Core's hosting events and a request-duration trigger
// see it.
app.MapGet("/slow", async (int? ms) =>
{
    int m = ms ?? 1000;
    if (m < 0 || m > 600_000)
        return Results.Text("ms must be 0..600000\n", statusCode: 400);
    await Task.Delay(m);
    return Results.Text($"slept {m} ms\n");
});

// Answers with the status code asked for (a response-status trigger's input).
app.MapGet("/status", (int? code) =>
{
    int c = code ?? 200;
    if (c < 200 || c > 599)
        return Results.Text("code must be 200..599\n", statusCode: 400);
    return Results.Text($"status {c}\n", statusCode: c);
});

app.Run();

// One lock per request: a holder thread takes it and sleeps, N waiters block
// in Monitor.Enter until the holder lets go after the given seconds.
static class LockContention
{
    public static void Start(int waiters, int seconds)
    {
        var gate = new object();
        var held = new ManualResetEventSlim();
        var holder = new Thread(() => Hold(gate, held, seconds))
            { IsBackground = true, Name = "lock-holder" };
        holder.Start();
        held.Wait();
        for (int i = 0; i < waiters; i++)
        {
            var t = new Thread(() => Wait(gate))
                { IsBackground = true, Name = $"lock-waiter-{i}" };
            t.Start();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Hold(object gate, ManualResetEventSlim held, int seconds)
    {
        lock (gate)
        {
            held.Set();
            Thread.Sleep(TimeSpan.FromSeconds(seconds));
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Wait(object gate)
    {
        lock (gate)
        {
        }
    }
}

static class HotLoop
{
    public static void Start(int seconds)
    {
        var t = new Thread(() => Spin(seconds))
            { IsBackground = true, Name = "hot-loop" };
        t.Start();
    }

    // Kept out of line so it appears as its own frame in samples and stacks.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static ulong Spin(int seconds)
    {
        var until = Environment.TickCount64 + seconds * 1000L;
        ulong x = 0;
        while (Environment.TickCount64 < until)
        {
            for (int i = 0; i < 100_000; i++)
                x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
        return x;
    }
}

// 64 KiB each: below the large-object threshold, so they live (and are
// counted) in the ordinary generations. Never freed.
sealed class LeakedBuffer
{
    public const int Size = 64 * 1024;
    static readonly List<LeakedBuffer> Retained = new();
    readonly byte[] data = new byte[Size];

    LeakedBuffer()
    {
        // Touch every page so the memory is resident, not just reserved.
        for (int i = 0; i < data.Length; i += 4096)
            data[i] = 1;
    }

    // Adds mbPerSecond MiB at once and then every second, seconds times in all.
    public static void StartSteady(int mbPerSecond, int seconds)
    {
        var t = new Thread(() =>
        {
            var next = Environment.TickCount64;
            for (int i = 0; i < seconds; i++)
            {
                Retain(mbPerSecond);
                next += 1000;
                var wait = next - Environment.TickCount64;
                if (wait > 0)
                    Thread.Sleep((int)wait);
            }
        }) { IsBackground = true, Name = "steady-leak" };
        t.Start();
    }

    // Adds mb MiB; returns the total retained so far, in MiB.
    public static long Retain(int mb)
    {
        lock (Retained)
        {
            for (int i = 0; i < mb * (1024 * 1024 / Size); i++)
                Retained.Add(new LeakedBuffer());
            return (long)Retained.Count * Size / (1024 * 1024);
        }
    }
}

sealed class LeakedOrder
{
    static readonly List<LeakedOrder> Retained = new();
    long id;
    long customer;
    decimal amount;
    DateTime created;
    string? note;

    public static int Retain(int count)
    {
        lock (Retained)
        {
            for (int i = 0; i < count; i++)
                Retained.Add(new LeakedOrder { id = Retained.Count, customer = i % 977, amount = i, created = DateTime.UtcNow, note = null });
            return Retained.Count;
        }
    }
}

static class Crash
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Throw(string message) =>
        throw new InvalidOperationException(message, new ArgumentException("the inner cause"));
}
