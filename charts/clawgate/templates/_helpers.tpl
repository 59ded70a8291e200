{{/* Chart name, cut to the 63 characters a label value allows. */}}
{{- define "clawgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name. Cut to 40 characters so that "<prefix>-control-plane-admin-token"
and the like stay within the 63 a Service or label allows.
*/}}
{{- define "clawgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "clawgate.controlPlane.fullname" -}}
{{ include "clawgate.fullname" . }}-control-plane
{{- end }}

{{- define "clawgate.dataPlane.fullname" -}}
{{ include "clawgate.fullname" . }}-data-plane
{{- end }}

{{/* Labels every resource carries. */}}
{{- define "clawgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "clawgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: clawgate
{{- end }}

{{/* Selector labels of one plane; call with (dict "root" $ "component" "data-plane"). */}}
{{- define "clawgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clawgate.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "clawgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret holding the admin token: the operator's, or the one this chart creates. */}}
{{- define "clawgate.adminTokenSecretName" -}}
{{- if .Values.controlPlane.adminToken.existingSecret }}
{{- .Values.controlPlane.adminToken.existingSecret }}
{{- else }}
{{- include "clawgate.controlPlane.fullname" . }}-admin-token
{{- end }}
{{- end }}

{{/* etcd endpoints, each rendered through tpl, as the comma list CLAWGATE_ETCD_ENDPOINTS takes. */}}
{{- define "clawgate.etcdEndpoints" -}}
{{- $endpoints := list }}
{{- range .Values.etcd.endpoints }}
{{- $endpoints = append $endpoints (tpl . $) }}
{{- end }}
{{- join "," $endpoints }}
{{- end }}

{{/* "host:port" for a listener bound inside the pod. */}}
{{- define "clawgate.listen" -}}
{{ .root.Values.listenAddress }}:{{ .port }}
{{- end }}

{{/*
True when the Prometheus Operator's resources may be rendered: the API server serves
monitoring.coreos.com/v1, or the operator said so (helm template has no cluster to ask).
*/}}
{{- define "clawgate.monitoringCRDs" -}}
{{- if or .Values.monitoring.assumeCRDsInstalled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}true{{ end }}
{{- end }}

{{/* Where both planes mount tls.existingSecret. */}}
{{- define "clawgate.tlsDir" -}}
/etc/clawgate/snapshot-tls
{{- end }}

{{/*
The Secret one plane mounts for the snapshot stream: tls.existingSecret for both, or the one
snapshot-tls-secret.yaml generates for that plane. Call with (dict "root" $ "plane" "data-plane").
*/}}
{{- define "clawgate.tlsSecretName" -}}
{{- if .root.Values.tls.existingSecret }}
{{- .root.Values.tls.existingSecret }}
{{- else }}
{{- include "clawgate.fullname" .root }}-{{ .plane }}-tls
{{- end }}
{{- end }}

{{/* The snapshot-tls volume of one plane; call like clawgate.tlsSecretName. */}}
{{- define "clawgate.tlsVolume" -}}
- name: snapshot-tls
  secret:
    secretName: {{ include "clawgate.tlsSecretName" . }}
    # Owner root, group fsGroup: the non-root process reads the key through its group.
    defaultMode: 0440
{{- end }}

{{/* A soft spread of one plane's pods over nodes; call like clawgate.selectorLabels. */}}
{{- define "clawgate.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "clawgate.selectorLabels" . | nindent 8 }}
{{- end }}

{{/* Checks the schema cannot express: relations between two values. */}}
{{- define "clawgate.validate" -}}
{{- $cp := .Values.controlPlane }}
{{- if le (int $cp.terminationGracePeriodSeconds) (int $cp.drainTimeoutSeconds) }}
{{- fail (printf "controlPlane.terminationGracePeriodSeconds (%d) must exceed controlPlane.drainTimeoutSeconds (%d): Kubernetes would SIGKILL the process mid-drain" (int $cp.terminationGracePeriodSeconds) (int $cp.drainTimeoutSeconds)) }}
{{- end }}
{{- $dp := .Values.dataPlane }}
{{- /* The data plane serves on through its drain delay before it drains. */}}
{{- $dpStop := add (int $dp.drainDelaySeconds) (int $dp.drainTimeoutSeconds) }}
{{- if le (int $dp.terminationGracePeriodSeconds) (int $dpStop) }}
{{- fail (printf "dataPlane.terminationGracePeriodSeconds (%d) must exceed dataPlane.drainDelaySeconds + dataPlane.drainTimeoutSeconds (%d + %d = %d): Kubernetes would SIGKILL the process mid-drain" (int $dp.terminationGracePeriodSeconds) (int $dp.drainDelaySeconds) (int $dp.drainTimeoutSeconds) (int $dpStop)) }}
{{- end }}
{{- if and $dp.autoscaling.enabled (gt (int $dp.autoscaling.minReplicas) (int $dp.autoscaling.maxReplicas)) }}
{{- fail (printf "dataPlane.autoscaling.minReplicas (%d) must not exceed dataPlane.autoscaling.maxReplicas (%d)" (int $dp.autoscaling.minReplicas) (int $dp.autoscaling.maxReplicas)) }}
{{- end }}
{{- end }}
