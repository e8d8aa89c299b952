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

{{- /* vccm.mounts: the directories mounted into the CCM container. */ -}}
{{- define "vccm.mounts" -}}
{{- $m := list "/etc/vsphere-ca" -}}
{{- if or .Values.caBundle.configMap .Values.caBundle.secret -}}{{- $m = append $m .Values.caBundle.mountPath -}}{{- end -}}
{{- range .Values.extraVolumeMounts -}}{{- $m = append $m .mountPath -}}{{- end -}}
{{- $m | toJson -}}
{{- end -}}
{{- /* vccm.checkMounted: fails when a file the config names is under no mount (the root filesystem is read-only). */ -}}
{{- define "vccm.checkMounted" -}}
{{- $mounts := include "vccm.mounts" . | fromJsonArray -}}
{{- $paths := dict -}}
{{- range $name, $vc := .Values.vcenters -}}{{- if and $vc.caFile (not $vc.caCert) -}}{{- $_ := set $paths (printf "vcenters.%s.caFile" $name) $vc.caFile -}}{{- end -}}{{- end -}}
{{- with .Values.global.caFile -}}{{- $_ := set $paths "global.caFile" . -}}{{- end -}}
{{- with .Values.global.secretsDirectory -}}{{- $_ := set $paths "global.secretsDirectory" . -}}{{- end -}}
{{- range $field, $path := $paths -}}
{{- $ok := false -}}
{{- range $mounts -}}{{- if or (eq $path .) (hasPrefix (printf "%s/" (trimSuffix "/" .)) $path) -}}{{- $ok = true -}}{{- end -}}{{- end -}}
{{- if not $ok -}}{{- fail (printf "%s: %s is under no mount of the CCM container (its root filesystem is read-only); set caBundle.configMap or caBundle.secret (mounted at caBundle.mountPath, %s), or add the volume to extraVolumes and extraVolumeMounts" $field $path $.Values.caBundle.mountPath) -}}{{- end -}}
{{- end -}}
{{- end -}}
