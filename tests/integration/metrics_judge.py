"""metrics_judge.py - metrics_judge.sh's reader of dotnet-counters' json and csv files and the agent's /metrics
text. One command per call; prints "ok ..." or "bad ..." lines (one per name for the name checks).

  fresh PROM PID TEND FAMILY...     exit 0 when every FAMILY has a sample of PID stamped after TEND (epoch s)
  names-json JSON PROM PID TEND     each instrument the tool reported: its family (docs/agent/metrics.md's mapping) in PROM
  names-csv CSV PROM PID            each EventCounter the tool reported: a family of its provider with that HELP
  gauges-csv CSV PROMS PID          gauges ("Metric" rows) of the tool vs the agent's samples of the same second
  rates-csv CSV PROMS PID           Request Rate: the tool's per second and the agent's per 5 s, vs 20/s driven
  live-csv CSV LIVESEQ              each EventCounter the tool reported is a /livemetrics record's displayName
  per5s PROMS PID EXPECT            the routing match attempts per 5 s the agent showed (one value per stamp)
"""
import collections
import datetime
import json
import re
import statistics
import sys

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (\d+))?$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def norm(s, provider):
    out, any_ok = [], False
    for i, ch in enumerate(s):
        ok = ch == '_' or (ch.isascii() and ch.isalpha()) or (i > 0 and ch.isascii() and ch.isdigit())
        if ok:
            any_ok = True
            out.append(ch.lower() if provider else ch)
        elif not provider:
            out.append('_')
    if provider and not any_ok:
        out.append('_')
    return ''.join(out)


def prom_name(provider, metric, unit):
    """dotnet-monitor's Prometheus name, as docs/agent/metrics.md states it (metrics_prom_name)."""
    u = unit or ''
    if u.lower() in ('', 'count'):
        u = ''
    elif u.lower() in ('b', 'mb'):
        u = 'bytes'
    elif u == '%':
        u = 'ratio'
    name = norm(provider, True) + '_' + norm(metric, False)
    return name + ('_' + norm(u, False) if u else '')


def parse_prom(path, pid):
    """{family: [(labels dict, value, ts_ms)]} for PID's samples (or those without a pid label), and HELP texts."""
    fam, helps = collections.defaultdict(list), {}
    for line in open(path, encoding='utf-8', errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('# HELP '):
            parts = line.split(' ', 3)
            helps[parts[2]] = parts[3] if len(parts) > 3 else ''
            continue
        m = SAMPLE.match(line)
        if not m or line.startswith('#'):
            continue
        labels = dict(LABEL.findall(m.group(2) or ''))
        if 'pid' in labels and labels['pid'] != str(pid):
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        fam[m.group(1)].append((labels, v, int(m.group(4) or 0)))
    return fam, helps


def split_name(display):
    """'dotnet.gc.collections ({collection} / 1 sec)' -> ('dotnet.gc.collections', '{collection}', True)."""
    m = re.match(r'^(.*) \(([^()]*)\)$', display)  # 'POH (Pinned Object Heap) Size (B)': the last (...)
    if not m:
        return display, '', False
    unit, rate = m.group(2), m.group(2).endswith(' / 1 sec')
    if rate:
        unit = unit[:-len(' / 1 sec')]
    return m.group(1), unit, rate


def csv_rows(path):
    """(epoch second, provider, display, unit, type, value) of dotnet-counters' csv."""
    rows = []
    with open(path, encoding='utf-8') as f:
        next(f, None)
        for line in f:
            parts = line.rstrip('\n').split(',')
            if len(parts) < 5:
                continue
            ts = None
            for fmt in ('%m/%d/%Y %H:%M:%S', '%m/%d/%Y %I:%M:%S %p', '%Y-%m-%d %H:%M:%S', '%d/%m/%Y %H:%M:%S'):
                try:
                    ts = datetime.datetime.strptime(parts[0], fmt)
                    break
                except ValueError:
                    pass
            name, unit, _ = split_name(parts[2])
            # the tool writes local time; this machine's is UTC (the container)
            epoch = ts.replace(tzinfo=datetime.timezone.utc).timestamp() if ts else None
            rows.append((epoch, parts[1], name, unit, parts[3], float(parts[4])))
    return rows


def cmd_fresh(prom, pid, tend, *families):
    fam, _ = parse_prom(prom, pid)
    stale = [f for f in families if not any(ts > float(tend) * 1000 for _, _, ts in fam.get(f, []))]
    print('ok' if not stale else 'bad stale: ' + ' '.join(stale))
    return 0 if not stale else 1


def cmd_names_json(path, prom, pid, tend):
    fam, _ = parse_prom(prom, pid)
    seen = {}
    for e in json.load(open(path))['Events']:
        name, unit, _ = split_name(e['name'])
        seen[(e['provider'], name)] = unit
    for (provider, name), unit in sorted(seen.items()):
        f = prom_name(provider, name, unit)
        samples = fam.get(f, [])
        fresh = sum(1 for _, _, ts in samples if ts > float(tend) * 1000)
        print(('ok' if samples else 'bad') + ' %s %s: %d series, %d read by the agent after the tool left' %
              (name, f, len(samples), fresh))


def cmd_names_csv(path, prom, pid):
    fam, helps = parse_prom(prom, pid)
    for provider, name in sorted({(r[1], r[2]) for r in csv_rows(path)}):
        prefix = norm(provider, True) + '_'
        hits = [f for f in fam if f.startswith(prefix) and helps.get(f) == name]
        slug = re.sub(r'[^A-Za-z0-9]+', '-', provider + ' ' + name).strip('-')
        print(('ok' if hits else 'bad') + ' %s %s' % (slug, hits[0] if hits else 'no family with HELP ' + name))


def agent_series(proms, pid, family):
    """The distinct (ts_ms, value) readings of family (one series) in concatenated scrapes."""
    fam, _ = parse_prom(proms, pid)
    return sorted({(ts, v) for _, v, ts in fam.get(family, [])})


def cmd_gauges_csv(path, proms, pid):
    rows = csv_rows(path)
    fam, helps = parse_prom(proms, pid)
    for provider, name, unit in sorted({(r[1], r[2], r[3]) for r in rows if r[4] == 'Metric'}):
        prefix = norm(provider, True) + '_'
        hits = [f for f in fam if f.startswith(prefix) and helps.get(f) == name]
        if not hits:
            continue
        scale = 1e6 if unit == 'MB' else 1.0
        tool = [(r[0], r[5] * scale) for r in rows if r[1] == provider and r[2] == name and r[0]]
        pairs = 0
        worst = 0.0
        for ts, v in sorted({(ts, v) for _, v, ts in fam[hits[0]]}):
            near = [tv for tt, tv in tool if tt == int(ts / 1000)]  # the tool stamps whole seconds
            if not near:
                continue
            pairs += 1
            err = min(abs(tv - v) / max(abs(v), abs(tv), 1e-9) for tv in near)
            worst = max(worst, err)
        if pairs:
            print(('ok' if worst <= 0.01 else 'bad') + ' %s: %d readings at the same second, worst %.4f %%' %
                  (hits[0], pairs, worst * 100))


def cmd_rates_csv(path, proms, pid):
    rows = [r for r in csv_rows(path) if r[1] == 'Microsoft.AspNetCore.Hosting' and r[2] == 'Request Rate']
    tool = [r[5] for r in rows][1:-1]
    if tool:
        med = statistics.median(tool)
        print(('ok' if abs(med - 20) <= 4 else 'bad') + ' tool per second: median %.1f of %s' % (med, tool))
    else:
        print('bad tool: no Request Rate rows')
    t0, t1 = min(r[0] for r in rows) * 1000, max(r[0] for r in rows) * 1000
    agent = [v for ts, v in agent_series(proms, pid, 'microsoftaspnetcorehosting_requests_per_second') if t0 <= ts <= t1]
    agent = agent[1:-1]
    if agent:
        med = statistics.median(agent)
        print(('ok' if abs(med - 100) <= 20 else 'bad') + ' agent per 5 s: median %.1f of %s' % (med, agent))
    else:
        print('bad agent: no requests_per_second readings while the tool ran')


def cmd_live_csv(path, seq):
    got = set()
    for rec in open(seq, encoding='utf-8', errors='replace').read().split('\x1e'):
        rec = rec.strip()
        if rec:
            r = json.loads(rec)
            got.add((r['provider'], r['displayName']))
    for provider, name in sorted({(r[1], r[2]) for r in csv_rows(path)}):
        print(('ok' if (provider, name) in got else 'bad') + ' %s/%s (%d records)' % (provider, name, len(got)))


def cmd_per5s(proms, pid, expect):
    fam, _ = parse_prom(proms, pid)
    f = 'microsoftaspnetcorerouting_aspnetcore_routing_match_attempts__match_attempt_'
    vals = [v for ts, v in sorted({(ts, v) for lab, v, ts in fam.get(f, []) if lab.get('http_route') == '/'})]
    vals = vals[1:-1]
    if len(vals) < 3:
        print('bad only %d readings: %s' % (len(vals), vals))
        return
    med, exp = statistics.median(vals), float(expect)
    print(('ok' if abs(med - exp) <= 0.2 * exp else 'bad') + ' median %.1f (want %.0f within 20 %%) of %s' % (med, exp, vals))


if __name__ == '__main__':
    cmds = {'fresh': cmd_fresh, 'names-json': cmd_names_json, 'names-csv': cmd_names_csv, 'gauges-csv': cmd_gauges_csv,
            'rates-csv': cmd_rates_csv, 'live-csv': cmd_live_csv, 'per5s': cmd_per5s}
    sys.exit(cmds[sys.argv[1]](*sys.argv[2:]) or 0)
