#!/usr/bin/env bash
# settings_refused.sh - the settings binder end to end (common/settings.c): a misspelt key in every section
# and from every source is refused at start (exit 2) by its full path and its source, with the name it
# misspells; dotnet-monitor's own settings this agent does not have still start, with a warning:
#   refused/*   the agent's own keys (a file, DOTNETMONITOR_, DIAGPORT_, a key-per-file directory),
#               Egress:FileSystem, Egress:S3Storage, Egress:AzureBlobStorage, Egress:Properties, Metrics,
#               CollectionRules (from --workload-config), the settings documents in DIAGPORT_SETTINGS,
#               DIAGPORT_EGRESS_SETTINGS and DIAGPORT_RULES, each message checked whole; a secret set beside
#               a misspelt key (SecretAccessKey, tlsKeyPassword) is in no log line
#   monitor/*   dotnet-monitor's documented names (DOTNETMONITOR_ variables, a key-per-file file): the agent
#               starts and logs setting-ignored naming each (from a settings file too, with its place);
#               a name outside the list is refused
set -u
cd "$(dirname "$0")/../.."
T_NAME=settings-refused
. tests/lib.sh
agent_setup settings
mkdir -p -m 0777 "$W/dumps" "$W/out"

# run NAME [VAR=VALUE...] -- [LAUNCH ARGS]: the agent until it says it listens or exits; its log in
# $W/NAME.log, its exit status in $W/NAME.rc (143 when it was listening and was stopped)
run() {
	local name=$1 pid vars=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	env "${vars[@]+"${vars[@]}"}" "$D" launch --socket "$W/dumps/$name" --urls http://127.0.0.1:0 \
		--dumps "$W/dumps" --no-auth --no-sandbox "$@" 2> "$W/$name.log" &
	pid=$!; PIDS+=($pid)
	listening_port "$W/$name.log" urls 20 "$pid" > /dev/null
	kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; echo $? > "$W/$name.rc"
}
# refused NAME WANT [VAR=VALUE...] -- [LAUNCH ARGS]: exit 2 and the "cannot start" line holds WANT whole
refused() {
	local name=$1 want=$2
	shift 2
	run "$name" "$@"
	WHY="exit $(cat "$W/$name.rc"), wanted '$want' in: $(grep -m1 '"cannot start"' "$W/$name.log" || tail -2 "$W/$name.log")"
	check "refused/$name" test "$(cat "$W/$name.rc")" = 2 -a -n "$(grep '"cannot start"' "$W/$name.log" | grep -F -- "$want")"
}

# ---- the agent's own settings, from each source
printf 'urlz: http://127.0.0.1:0\n' > "$W/agent.yaml"
refused agent-file "urlz ($W/agent.yaml:1:7): unknown setting; did you mean urls?" -- --config "$W/agent.yaml"
refused agent-dotnetmonitor "Metrics:Enabeld (environment variable DOTNETMONITOR_Metrics__Enabeld): unknown setting; did you mean Enabled?" \
	DOTNETMONITOR_Metrics__Enabeld=false --
refused agent-diagport "METRICSINTERVALL (environment variable DIAGPORT_METRICS_INTERVALL): unknown setting; did you mean metricsInterval?" \
	DIAGPORT_METRICS_INTERVALL=5 --
mkdir -p "$W/kpf-agent"
printf '/tmp\n' > "$W/kpf-agent/Storage__DumpTempFoldr"
refused agent-key-per-file "Storage:DumpTempFoldr ($W/kpf-agent/Storage__DumpTempFoldr): unknown setting; did you mean DumpTempFolder?" \
	-- --config-dir "$W/kpf-agent"

# ---- Egress: FileSystem, S3Storage, AzureBlobStorage, Properties
printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPth: %s/out\n' "$W" > "$W/fs.yaml"
refused egress-filesystem "Egress:FileSystem:out:DirectoryPth ($W/fs.yaml:4:21): unknown setting; did you mean DirectoryPath?" \
	-- --config "$W/fs.yaml"
printf 'Egress:\n  S3Storage:\n    s3:\n      BuketName: diag\n' > "$W/s3.yaml"
refused egress-s3 "Egress:S3Storage:s3:BuketName ($W/s3.yaml:4:18): unknown setting; did you mean BucketName?" \
	-- --config "$W/s3.yaml"
refused egress-azure "Egress:AzureBlobStorage:az:ContainerNme (environment variable DOTNETMONITOR_Egress__AzureBlobStorage__az__ContainerNme): unknown setting; did you mean ContainerName?" \
	DOTNETMONITOR_Egress__AzureBlobStorage__az__AccountUri=https://acct.blob.core.windows.net \
	DOTNETMONITOR_Egress__AzureBlobStorage__az__ContainerNme=diag --
mkdir -p "$W/kpf-props"
printf 'https://acct.blob.core.windows.net' > "$W/kpf-props/Egress__AzureBlobStorage__az__AccountUri"
printf 'diag' > "$W/kpf-props/Egress__AzureBlobStorage__az__ContainerName"
printf 'MyKey' > "$W/kpf-props/Egress__AzureBlobStorage__az__AccountKeyName"
printf 'a2V5' > "$W/kpf-props/Egress__Properties__MyKye"
refused egress-properties "Egress:Properties:MyKye ($W/kpf-props/Egress__Properties__MyKye): unknown setting; did you mean MyKey?" \
	-- --config-dir "$W/kpf-props"

# ---- Metrics, the collection rules (a workload's own source)
refused metrics "environment variable DIAGPORT_Metrics__Providers__0__ProviderNme: Metrics:Providers:0:ProviderNme: not a setting diagport knows here; did you mean ProviderName?" \
	DIAGPORT_Metrics__Providers__0__ProviderNme=Grpc.Net.Client --
cat > "$W/rules.yaml" <<EOF
Egress:
  FileSystem:
    out:
      DirectoryPath: $W/out
CollectionRules:
  r:
    Trigger:
      Type: Startup
    Actions:
      - Type: CollectDump
        Settings:
          Egress: out
    Filtres:
      - Key: ProcessName
        Value: app
EOF
refused rules-workload "$W/rules.yaml:14:14: CollectionRules:r:Filtres: not a setting diagport knows here; did you mean Filters?" \
	-- --workload-config "$W/rules.yaml"

# ---- settings documents in variables; a secret beside a misspelt key never reaches the log
refused settings-variable "sokcet (environment variable DIAGPORT_SETTINGS:1:11): unknown setting; did you mean socket?" \
	'DIAGPORT_SETTINGS={"sokcet":"/x"}' --
refused egress-variable "Egress:S3Storage:s3:BuketName (environment variable DIAGPORT_EGRESS_SETTINGS:1:43): unknown setting; did you mean BucketName?" \
	'DIAGPORT_EGRESS_SETTINGS={"Egress":{"S3Storage":{"s3":{"BuketName":"b","SecretAccessKey":"s3-secret-2f9c1e7a"}}}}' --
WHY="$(grep -c s3-secret-2f9c1e7a "$W/egress-variable.log") log lines hold the secret"
check refused/egress-variable-no-secret test "$(grep -c s3-secret-2f9c1e7a "$W/egress-variable.log")" = 0
refused rules-variable "environment variable DIAGPORT_RULES:1:43: CollectionRules:r:Trigger: is required; CollectionRules:r:Triger here is not a setting diagport knows (misspelt?)" \
	'DIAGPORT_RULES={"CollectionRules":{"r":{"Triger":{"Type":"Startup"}}}}' --
printf 'tlsKeyPasword: x\ntlsKeyPassword: tls-secret-8d41b0c3\n' > "$W/tls.yaml"
refused tls-password "tlsKeyPasword ($W/tls.yaml:1:16): unknown setting; did you mean tlsKeyPassword?" -- --config "$W/tls.yaml"
WHY="$(grep -c tls-secret-8d41b0c3 "$W/tls-password.log") log lines hold the secret"
check refused/tls-password-no-secret test "$(grep -c tls-secret-8d41b0c3 "$W/tls-password.log")" = 0

# ---- dotnet-monitor's own names: warned and skipped; others refused
mkdir -p "$W/kpf-monitor"
printf 'true' > "$W/kpf-monitor/InProcessFeatures__Enabled"
run monitor DOTNETMONITOR_Authentication__MonitorApiKey__Subject=ae5473b6-8dad-498d-b915-ffffffffffff \
	DOTNETMONITOR_Logging__LogLevel__Microsoft=Warning DotnetMonitor_Storage__DefaultSharedPath=/tmp -- \
	--config-dir "$W/kpf-monitor"
WHY="exit $(cat "$W/monitor.rc"): $(grep -m3 -e '"cannot start"' -e setting-ignored "$W/monitor.log")"
check monitor/starts grep -q '"event":"listening"' "$W/monitor.log"
for v in DOTNETMONITOR_Authentication__MonitorApiKey__Subject DOTNETMONITOR_Logging__LogLevel__Microsoft \
	DotnetMonitor_Storage__DefaultSharedPath "$W/kpf-monitor/InProcessFeatures__Enabled"; do
	WHY="no setting-ignored for $v: $(grep -m3 setting-ignored "$W/monitor.log")"
	check "monitor/warned/${v##*[_/]}" grep -qF "\"event\":\"setting-ignored\",\"variable\":\"$v\"" "$W/monitor.log"
done
refused monitor-misspelt "InProcessFeatures:Enabeld (environment variable DOTNETMONITOR_InProcessFeatures__Enabeld): unknown setting; did you mean Enabled?" \
	DOTNETMONITOR_InProcessFeatures__Enabeld=true --

# a settings file copied from a dotnet-monitor deployment: its names this agent lacks warned, with their place
cat > "$W/monitor.json" <<'EOF2'
{
  "Logging": { "LogLevel": { "Default": "Information" }, "Console": { "FormatterName": "json" } },
  "CorsConfiguration": { "AllowedOrigins": "http://localhost" }
}
EOF2
run monitor-file -- --config "$W/monitor.json"
WHY="exit $(cat "$W/monitor-file.rc"): $(grep -m3 -e '"cannot start"' -e setting-ignored "$W/monitor-file.log")"
check monitor/file-starts grep -q '"event":"listening"' "$W/monitor-file.log"
check monitor/file-warned grep -qF "\"variable\":\"Logging:Console:FormatterName ($W/monitor.json:2:88)\"" "$W/monitor-file.log"
check monitor/file-warned-cors grep -qF "\"variable\":\"CorsConfiguration:AllowedOrigins ($W/monitor.json:3:44)\"" "$W/monitor-file.log"
printf '{ "CorsConfiguration": { "AllowedOrigin": "http://localhost" } }\n' > "$W/monitor-typo.json"
refused monitor-file-misspelt "CorsConfiguration:AllowedOrigin ($W/monitor-typo.json:1:43): unknown setting; did you mean AllowedOrigins?" \
	-- --config "$W/monitor-typo.json"

# many of them (a manifest generated with hundreds): the first 32 said one a line, the rest counted in one
vars=(); for i in $(seq 1 100); do vars+=("DOTNETMONITOR_Logging__LogLevel__Category$i=Warning"); done
run monitor-many "${vars[@]}" --
WHY="$(grep -c '"setting-ignored"' "$W/monitor-many.log") setting-ignored lines: $(grep -m1 '"more"' "$W/monitor-many.log")"
check monitor/many-starts grep -q '"event":"listening"' "$W/monitor-many.log"
check monitor/many-said-32 test "$(grep '"setting-ignored"' "$W/monitor-many.log" | grep -c '"variable"')" = 32
check monitor/many-counted grep -q '"event":"setting-ignored","more":68,' "$W/monitor-many.log"

# a name's value does not hide it: a misspelt name holding a list or an empty map is said as a misspelling
printf 'sokcet: []\n' > "$W/list.yaml"
refused misspelt-list "sokcet ($W/list.yaml:1:9): unknown setting; did you mean socket?" -- --config "$W/list.yaml"
printf 'sokcet: {}\n' > "$W/empty.yaml"
refused misspelt-empty-map "sokcet ($W/empty.yaml:1:9): unknown setting; did you mean socket?" -- --config "$W/empty.yaml"
printf 'socket: {}\n' > "$W/scalar-map.yaml"
refused scalar-as-map "$W/scalar-map.yaml:1:9: socket takes a single value, not a map" -- --config "$W/scalar-map.yaml"
# dotnet-monitor's lists in a settings file (DefaultProcess:Filters) are warned about item by item
printf 'DefaultProcess:\n  Filters:\n    - Key: ProcessName\n      Value: app\n' > "$W/monitor-list.yaml"
run monitor-list -- --config "$W/monitor-list.yaml"
WHY="exit $(cat "$W/monitor-list.rc"): $(grep -m3 -e '"cannot start"' -e setting-ignored "$W/monitor-list.log")"
check monitor/list-starts grep -q '"event":"listening"' "$W/monitor-list.log"
check monitor/list-warned grep -qF "\"variable\":\"DefaultProcess:Filters:0:Key ($W/monitor-list.yaml:3:12)\"" "$W/monitor-list.log"
# a lower-case diagport_ variable would never be read: said, not passed over
refused lower-case-variable "environment variable diagport_socket: diagport's variables are named in capitals" \
	diagport_socket=/tmp/x --
# a workload's key-per-file directory is read only within itself: a link out (to the agent's token) refused
mkdir -p "$W/kpf-link"
printf 'SUPERSECRETTOKEN-0123456789\n' > "$W/token"
ln -s "$W/token" "$W/kpf-link/Egress__FileSystem__a__DirectoryPath"
refused workload-link-out "settings directory $W/kpf-link: Egress__FileSystem__a__DirectoryPath leads outside the directory" \
	-- --workload-config "$W/kpf-link"
check workload-link-out/secret-not-said sh -c "! grep -q SUPERSECRETTOKEN '$W/workload-link-out.log'"
# a volume's own links (KEY -> ..data/KEY, ..data -> a timestamped directory) stay inside: read
mkdir -p "$W/kpf-vol/..2026_11_28" && printf '%s\n' "$W/out" > "$W/kpf-vol/..2026_11_28/Egress__FileSystem__a__DirectoryPath"
ln -s ..2026_11_28 "$W/kpf-vol/..data" && ln -s ..data/Egress__FileSystem__a__DirectoryPath "$W/kpf-vol/Egress__FileSystem__a__DirectoryPath"
run workload-volume -- --workload-config "$W/kpf-vol"
WHY="exit $(cat "$W/workload-volume.rc"): $(grep -m1 '"cannot start"' "$W/workload-volume.log")"
check workload-volume/starts grep -q '"event":"listening"' "$W/workload-volume.log"
