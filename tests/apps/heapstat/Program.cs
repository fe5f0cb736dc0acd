// heapstat DUMP - the live objects of the GC heap in a core dump, per type, read with ClrMD:
// {"objects":N,"bytes":N,"types":[{"type":"System.Byte[]","count":N,"bytes":N},...]} (largest first).
// Only objects the heap walk calls valid are counted. Exit 2 on a dump ClrMD cannot open.
using System.Text.Json;
using Microsoft.Diagnostics.Runtime;

if (args.Length != 1)
{
    Console.Error.WriteLine("usage: heapstat DUMP");
    return 2;
}
try
{
    using var target = DataTarget.LoadDump(args[0]);
    // The DAC of the runtime that wrote the dump: the tests run the app on the runtime heapstat itself runs on,
    // whose directory holds libmscordaccore.so (ClrMD does not download one on Linux). The dump may not carry
    // the runtime module's version (a WithHeap core), so the version check is skipped: the same runtime runs both.
    var clr = target.ClrVersions[0];
    var dac = Path.Combine(Path.GetDirectoryName(typeof(object).Assembly.Location)!, "libmscordaccore.so");
    using var runtime = File.Exists(dac) ? clr.CreateRuntime(dac, ignoreMismatch: true) : clr.CreateRuntime();
    var stats = new Dictionary<string, (long Count, long Bytes)>();
    long objects = 0, bytes = 0;
    foreach (var o in runtime.Heap.EnumerateObjects())
    {
        if (!o.IsValid || o.Type is null)
            continue;
        var name = o.Type.Name ?? "?";
        stats.TryGetValue(name, out var s);
        stats[name] = (s.Count + 1, s.Bytes + (long)o.Size);
        objects++;
        bytes += (long)o.Size;
    }
    var types = stats.OrderByDescending(kv => kv.Value.Bytes)
        .Select(kv => new { type = kv.Key, count = kv.Value.Count, bytes = kv.Value.Bytes });
    Console.WriteLine(JsonSerializer.Serialize(new { objects, bytes, types }));
    return 0;
}
catch (Exception e)
{
    Console.Error.WriteLine($"heapstat: {args[0]}: {e.Message}");
    return 2;
}
