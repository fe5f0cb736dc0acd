// The example's API: what an on-call engineer would want diagnostics for.
// GET /orders/{id} answers; GET /healthz is the load balancer's check;
// GET /spin?ms=N burns CPU for N ms (a trace or cpuprofile shows it);
// POST /leak?mb=N keeps N MiB alive (a gcdump shows it).
using System.Diagnostics;

var builder = WebApplication.CreateBuilder(args);
var app = builder.Build();
var kept = new List<byte[]>();

app.MapGet("/healthz", () => Results.Ok("ok"));
app.MapGet("/orders/{id:int}", (int id) => Results.Ok(new { id, status = id % 2 == 0 ? "shipped" : "open" }));
app.MapGet("/spin", (int? ms) =>
{
    var budget = Math.Clamp(ms ?? 100, 1, 10_000);
    var sw = Stopwatch.StartNew();
    long n = 0;
    while (sw.ElapsedMilliseconds < budget)
        n++;
    return Results.Ok(new { spunMs = sw.ElapsedMilliseconds, iterations = n });
});
app.MapPost("/leak", (int? mb) =>
{
    var count = Math.Clamp(mb ?? 1, 1, 256);
    lock (kept)
    {
        for (var i = 0; i < count; i++)
            kept.Add(new byte[1 << 20]);
        return Results.Ok(new { keptMiB = kept.Count });
    }
});

app.Run();
