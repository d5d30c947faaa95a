{{/* The manager's and every agent's image: repository:tag, the tag defaulting to appVersion. */}}
{{- define "dynamic-scoring.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository must not be empty" -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{/*
Whether the manager's pod pins the image's user (runAsUser/runAsGroup 65532): on Kubernetes yes; on
OpenShift no, because its restricted-v2 SCC assigns every pod a UID from the namespace's range and
refuses a pod that asks for another.  manager.platform auto: OpenShift when the API server serves
security.openshift.io/v1 (helm install sees the real API; helm template needs
--api-versions security.openshift.io/v1 or an explicit value).
*/}}
{{- define "dynamic-scoring.pinUser" -}}
{{- $platform := .Values.manager.platform | default "auto" -}}
{{- if eq $platform "kubernetes" -}}
true
{{- else if and (eq $platform "auto") (not (.Capabilities.APIVersions.Has "security.openshift.io/v1")) -}}
true
{{- end -}}
{{- end -}}
