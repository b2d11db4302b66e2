{{/* Names --------------------------------------------------------------------------- */}}

{{- define "cowork-gym.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cowork-gym.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cowork-gym.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cowork-gym.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "cowork-gym.sandboxServiceAccountName" -}}
{{- default (printf "%s-sandbox" (include "cowork-gym.fullname" .) | trunc 63 | trimSuffix "-") .Values.sandboxServiceAccount.name }}
{{- end }}

{{- define "cowork-gym.peeringName" -}}
{{- default (include "cowork-gym.fullname" .) .Values.operator.peering.name }}
{{- end }}

{{- define "cowork-gym.image" -}}
{{- printf "%s:%s" .Values.operator.image.repository (default .Chart.AppVersion .Values.operator.image.tag) }}
{{- end }}

{{/* Labels -------------------------------------------------------------------------- */}}

{{- define "cowork-gym.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cowork-gym.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cowork-gym.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "cowork-gym.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cowork-gym
{{- end }}

{{/* The operator pods (a selector that never matches sandbox pods). */}}
{{- define "cowork-gym.operatorSelectorLabels" -}}
{{ include "cowork-gym.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
The Prometheus job name of the operator, whatever the release is called: the ServiceMonitor
takes it from this Service label (jobLabel), and rules/coworkgym-alerts.yaml matches it.
*/}}
{{- define "cowork-gym.metricsJob" -}}
cowork-gym-operator
{{- end }}

{{/* Labels the operator puts on sandbox pods; the NetworkPolicies select them. */}}
{{- define "cowork-gym.sandboxLabelKey" -}}
coworkgym.dev/sandbox
{{- end }}
{{- define "cowork-gym.egressLabelKey" -}}
coworkgym.dev/egress
{{- end }}

{{/* Checks --------------------------------------------------------------------------- */}}

{{- define "cowork-gym.validate" -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.peering.enabled) }}
{{- fail "operator.replicas > 1 needs operator.peering.enabled=true: standalone kopf operators would all process the same objects" }}
{{- end }}
{{- if and .Values.sandboxNamespaces (not .Values.operator.clusterWide) }}
{{- fail "sandboxNamespaces needs operator.clusterWide=true: a namespaced operator runs sandboxes in the release namespace only" }}
{{- end }}
{{- end }}

{{/* A matchLabels map as a label selector string: a=1,b=2 (sorted). */}}
{{- define "cowork-gym.selectorString" -}}
{{- $pairs := list }}
{{- range $k, $v := . }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* An egress rule to the cluster DNS; the argument is a networkPolicy.*.dns value. */}}
{{- define "cowork-gym.dnsEgress" -}}
# Lookups by name, to the cluster DNS only.
- to:
    - podSelector:
        matchLabels:
          {{- toYaml .podSelector | nindent 10 }}
      namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .namespace }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}

{{/* Namespaces that get the sandbox ServiceAccount and NetworkPolicies, as a JSON list. */}}
{{- define "cowork-gym.sandboxNamespaces" -}}
{{- prepend .Values.sandboxNamespaces .Release.Namespace | uniq | toJson }}
{{- end }}
