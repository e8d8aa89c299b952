{{- define "vccm.name" -}}vsphere-cloud-controller-manager{{- end -}}
{{- define "vccm.labels" -}}
app.kubernetes.io/name: {{ include "vccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "vccm.secretNames" -}}
{{- $names := list .Values.credentials.secretName -}}
{{- range $name, $vc := .Values.vcenters -}}{{- if $vc.secretName -}}{{- $names = append $names $vc.secretName -}}{{- end -}}{{- end -}}
{{- $names | uniq | toJson -}}
{{- end -}}
