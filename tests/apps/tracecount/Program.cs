// tracecount FILE [PROVIDER...]: reads FILE with TraceEvent's EventPipeEventSource and prints one
// JSON object: {"totalEvents":N,"seconds":S,"events":[{"provider":P,"id":I,"count":C},...]}, so that tests
// can compare it with `diagport nettrace stats FILE`. Events are counted by provider GUID and
// event id. A GUID is shown by name when TraceEvent knows it (the runtime's own providers) or
// when it is the EventSource GUID of a PROVIDER name given on the command line (TraceEvent
// derives it); else as "Provider(GUID)".
using System.Text.Json;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;
using Microsoft.Diagnostics.Tracing.Session;

if (args.Length < 1)
{
    Console.Error.WriteLine("usage: tracecount FILE.nettrace [PROVIDER...]");
    return 2;
}
var names = new Dictionary<Guid, string>
{
    [ClrTraceEventParser.ProviderGuid] = ClrTraceEventParser.ProviderName,
    [ClrRundownTraceEventParser.ProviderGuid] = ClrRundownTraceEventParser.ProviderName,
    [ClrPrivateTraceEventParser.ProviderGuid] = ClrPrivateTraceEventParser.ProviderName,
    // the runtime's sample profiler has a fixed GUID, not one derived from its name
    [new Guid("3c530d44-97ae-513a-1e6d-783e8f8e03a9")] = "Microsoft-DotNETCore-SampleProfiler",
};
foreach (var n in args.Skip(1))
    names.TryAdd(TraceEventProviders.GetEventSourceGuidFromName(n), n);
var counts = new Dictionary<(Guid Provider, int Id), long>();
long total = 0;
var clock = System.Diagnostics.Stopwatch.StartNew();
using (var source = new EventPipeEventSource(args[0]))
{
    source.AllEvents += e =>
    {
        total++;
        var key = (e.ProviderGuid, (int)e.ID);
        counts[key] = counts.GetValueOrDefault(key) + 1;
    };
    source.Process();
}
var events = counts
    .Select(kv => new { provider = names.TryGetValue(kv.Key.Provider, out var n) ? n : $"Provider({kv.Key.Provider})", id = kv.Key.Id, count = kv.Value })
    .OrderBy(e => e.provider, StringComparer.Ordinal).ThenBy(e => e.id);
var seconds = clock.Elapsed.TotalSeconds; // reading the file: opening it and Process(), not the runtime's start
Console.WriteLine(JsonSerializer.Serialize(new { totalEvents = total, seconds, events }));
return 0;
