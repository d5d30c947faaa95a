{{/* The manager's and every agent's image: repository:tag, the tag defaulting to appVersion. */}}
{{- define "dynamic-scoring.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository must not be empty" -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}
