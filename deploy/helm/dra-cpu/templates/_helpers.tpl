{{/*
The chart installs one driver per cluster: the driver name dra.cpu and the
DeviceClass dra.cpu are cluster-wide, so object names are fixed rather than
derived from the release name, and equal to those of deploy/install.yaml.
*/}}

{{/* Namespace of the namespaced objects. */}}
{{- define "dra-cpu.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* Name of the service account the pod runs as. */}}
{{- define "dra-cpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default "dra-cpu" -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
A driver setting that args and driverConfig can both give: args.<arg> when
set (not null, not ""), else driverConfig.<key> when set, else def.
Call with (dict "root" $ "arg" "cpuDeviceMode" "key" "cpuDeviceMode" "def" "grouped").
*/}}
{{- define "dra-cpu.setting" -}}
{{- $a := index (.root.Values.args | default dict) .arg -}}
{{- $c := index (.root.Values.driverConfig | default dict) .key -}}
{{- if and (not (kindIs "invalid" $a)) (ne (toString $a) "") -}}
{{- $a -}}
{{- else if and (not (kindIs "invalid" $c)) (ne (toString $c) "") -}}
{{- $c -}}
{{- else -}}
{{- .def -}}
{{- end -}}
{{- end -}}

{{/* The kubelet root, cleaned, without a trailing slash ("" for "/"). */}}
{{- define "dra-cpu.kubeletRoot" -}}
{{- clean .Values.kubeletRootDir | trimSuffix "/" -}}
{{- end -}}

{{/*
driverConfig keys the chart does not pass through, each with what to do
instead. The schema lets them in so that the template can say it.
*/}}
{{- define "dra-cpu.refusedKeys" -}}
cdiDir: set the chart value cdiDir (the hostPath mount follows it)
stateDir: set the chart value stateDir (the hostPath mount follows it)
nriSocket: set the chart value nriSocket (the NRI mount follows it)
nri: set the chart value nri (the NRI mount follows it)
nriPushUpdates: set the chart value nriPushUpdates
bpf: set the chart value bpf (the capabilities follow it)
pinningEnforcement: set the chart value pinningEnforcement
contentionHistogram: set the chart value contentionHistogram
events: set the chart value events (the RBAC rules follow it)
claimStatus: set the chart value claimStatus (the RBAC rules follow it)
bindAddress: set the chart value healthzPort (the driver takes it only as a flag)
kubeletRootDir: set the chart value kubeletRootDir (the driver takes it only as a flag)
sysfsOverlay: dra-cpu reads a sysfs capture with driverConfig.sysfsRoot instead
rtCPUs: set the chart value rtCPUs (the KILL capability and the writable cgroup mount follow it)
{{- end -}}

{{/*
The configuration file, config.yaml of the ConfigMap dra-cpu-config. With
default values it is deploy/base/configmap.yaml's, byte for byte: the keys
written there always, any other key only when it differs from the driver's
default. Strings are JSON-quoted, which YAML reads as double-quoted scalars.
*/}}
{{- define "dra-cpu.config" -}}
{{- $refused := include "dra-cpu.refusedKeys" . | fromYaml -}}
{{- $dc := .Values.driverConfig | default dict -}}
{{- range $k, $v := $dc -}}
{{- if hasKey $refused $k -}}
{{- fail (printf "driverConfig.%s: %s" $k (get $refused $k)) -}}
{{- end -}}
{{- end -}}
{{- $mode := include "dra-cpu.setting" (dict "root" . "arg" "cpuDeviceMode" "key" "cpuDeviceMode" "def" "grouped") -}}
{{- $groupBy := include "dra-cpu.setting" (dict "root" . "arg" "groupBy" "key" "groupBy" "def" "numanode") -}}
{{- $reserved := include "dra-cpu.setting" (dict "root" . "arg" "reservedCPUs" "key" "reservedCPUs" "def" "") -}}
{{- $hostname := include "dra-cpu.setting" (dict "root" . "arg" "hostnameOverride" "key" "hostnameOverride" "def" "") -}}
{{- $verbosity := include "dra-cpu.setting" (dict "root" . "arg" "logLevel" "key" "logVerbosity" "def" "") -}}
apiVersion: v1alpha1
# grouped: one device per group with consumable capacity dra.cpu/cpu;
# individual: one device per CPU.
cpuDeviceMode: {{ $mode }}
# grouped mode: numanode, socket or machine.
groupBy: {{ $groupBy }}
# CPUs never published, allocated or shared (list format, quoted).
reservedCPUs: {{ $reserved | toJson }}
# audit, remediate or deny (docs/deploy.md).
pinningEnforcement: {{ .Values.pinningEnforcement }}
contentionHistogram: {{ .Values.contentionHistogram }}
{{- if not .Values.bpf }}
bpf: false
{{- end }}
{{- if ne .Values.events "warning" }}
events: {{ .Values.events }}
{{- end }}
{{- if not .Values.claimStatus }}
claimStatus: false
{{- end }}
{{- if not .Values.nri }}
nri: false
{{- end }}
{{- if ne .Values.nriSocket "/var/run/nri/nri.sock" }}
nriSocket: {{ .Values.nriSocket | toJson }}
{{- end }}
{{- if not .Values.nriPushUpdates }}
nriPushUpdates: false
{{- end }}
{{- if .Values.rtCPUs }}
rtCPUs: {{ .Values.rtCPUs | toJson }}
{{- end }}
{{- if ne .Values.cdiDir "/var/run/cdi" }}
cdiDir: {{ .Values.cdiDir | toJson }}
{{- end }}
{{- if ne .Values.stateDir "/var/run/dra-cpu" }}
stateDir: {{ .Values.stateDir | toJson }}
{{- end }}
{{- if $hostname }}
hostnameOverride: {{ $hostname | toJson }}
{{- end }}
{{- if $verbosity }}
logVerbosity: {{ $verbosity }}
{{- end }}
{{- range $k := keys $dc | sortAlpha }}
{{- if not (has $k (list "apiVersion" "cpuDeviceMode" "groupBy" "reservedCPUs" "hostnameOverride" "logVerbosity")) }}
{{- $v := get $dc $k }}
{{- if not (kindIs "invalid" $v) }}
{{ $k }}: {{ toJson $v }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
