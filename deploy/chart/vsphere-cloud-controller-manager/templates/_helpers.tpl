{{- define "vccm.name" -}}vsphere-cloud-controller-manager{{- end -}}
{{- define "vccm.labels" -}}
app.kubernetes.io/name: {{ include "vccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "vccm.secretNames" -}}
{{- $names := list (include "vccm.credentials" . | fromJson).secretName -}}
{{- with (include "vccm.refConfig" . | fromJson).secret -}}{{- with .name -}}{{- $names = append $names . -}}{{- end -}}{{- end -}}
{{- range $name, $vc := include "vccm.vcenters" . | fromJson -}}{{- if $vc.secretName -}}{{- $names = append $names $vc.secretName -}}{{- end -}}{{- end -}}
{{- $names | uniq | toJson -}}
{{- end -}}

{{- /* vccm.mounts: the directories mounted into the CCM container. */ -}}
{{- define "vccm.mounts" -}}
{{- $m := list "/etc/vsphere-ca" -}}
{{- if or .Values.caBundle.configMap .Values.caBundle.secret -}}{{- $m = append $m .Values.caBundle.mountPath -}}{{- end -}}
{{- range (include "vccm.pod" . | fromYaml).extraVolumeMounts -}}{{- $m = append $m .mountPath -}}{{- end -}}
{{- $m | toJson -}}
{{- end -}}
{{- /* vccm.checkMounted: fails when a file the config names is under no mount (the root filesystem is read-only). */ -}}
{{- define "vccm.checkMounted" -}}
{{- $mounts := include "vccm.mounts" . | fromJsonArray -}}
{{- $paths := dict -}}
{{- range $name, $vc := include "vccm.vcenters" . | fromJson -}}{{- if and $vc.caFile (not $vc.caCert) -}}{{- $_ := set $paths (printf "vcenters.%s.caFile" $name) $vc.caFile -}}{{- end -}}{{- end -}}
{{- with .Values.global.caFile -}}{{- $_ := set $paths "global.caFile" . -}}{{- end -}}
{{- with .Values.global.secretsDirectory -}}{{- $_ := set $paths "global.secretsDirectory" . -}}{{- end -}}
{{- range $field, $path := $paths -}}
{{- $ok := false -}}
{{- range $mounts -}}{{- if or (eq $path .) (hasPrefix (printf "%s/" (trimSuffix "/" .)) $path) -}}{{- $ok = true -}}{{- end -}}{{- end -}}
{{- if not $ok -}}{{- fail (printf "%s: %s is under no mount of the CCM container (its root filesystem is read-only); set caBundle.configMap or caBundle.secret (mounted at caBundle.mountPath, %s), or add the volume to extraVolumes and extraVolumeMounts" $field $path $.Values.caBundle.mountPath) -}}{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
The reference chart's values (kubernetes/cloud-provider-vsphere, charts/vsphere-cpi) are read with
their meaning: daemonset.* for the pod, config.* for a single vCenter, serviceAccount.* and
rbac.create. vccm.pod returns the pod's effective settings as YAML: this chart's value, unless the
reference's is set.
*/ -}}
{{- define "vccm.pod" -}}
{{- $ds := .Values.daemonset | default dict -}}
{{- $cmd := get $ds "cmdline" | default dict -}}
{{- $cc := get $cmd "cloudConfig" | default dict -}}
{{- /* daemonset.image and tag name the reference CCM's image: never used, this chart runs its own. */ -}}
{{- $image := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
configDir: {{ get $cc "dir" | default "/etc/kubernetes" | quote }}
configFile: {{ get $cc "file" | default "vsphere.conf" | quote }}
image: {{ $image | quote }}
pullPolicy: {{ get $ds "pullPolicy" | default .Values.image.pullPolicy | quote }}
logLevel: {{ hasKey $cmd "logging" | ternary (get $cmd "logging") .Values.logLevel }}
additionalParams: {{ get $cmd "additionalParams" | default dict | toJson }}
annotations: {{ get $ds "annotations" | default dict | toJson }}
podAnnotations: {{ merge (dict) (get $ds "podAnnotations" | default dict) (.Values.podAnnotations | default dict) | toJson }}
podLabels: {{ merge (dict) (get $ds "podLabels" | default dict) (.Values.podLabels | default dict) | toJson }}
tolerations: {{ hasKey $ds "tolerations" | ternary (get $ds "tolerations") .Values.tolerations | toJson }}
affinity: {{ get $ds "affinity" | default .Values.affinity | default dict | toJson }}
hostAliases: {{ get $ds "hostAliases" | default .Values.hostAliases | default list | toJson }}
dnsPolicy: {{ get $ds "dnsPolicy" | default .Values.dnsPolicy | default "" | quote }}
resources: {{ get $ds "resources" | default .Values.resources | toJson }}
extraVolumes: {{ concat (.Values.extraVolumes | default list) (get $ds "extraVolumes" | default list) | toJson }}
{{- /* The reference's values.yaml says extraVolumesMounts, its template reads extraVolumeMounts: both. */}}
extraVolumeMounts: {{ concat (.Values.extraVolumeMounts | default list) (get $ds "extraVolumeMounts" | default list) (get $ds "extraVolumesMounts" | default list) | toJson }}
{{- end -}}

{{- /* vccm.refConfig: the reference chart's config (with global.config over it, as it merges them), or {}. */ -}}
{{- define "vccm.refConfig" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- with (.Values.global | default dict).config -}}{{- $config = mergeOverwrite $config (deepCopy .) -}}{{- end -}}
{{- $config | toJson -}}
{{- end -}}

{{- /* vccm.serviceAccountName: serviceAccount.name (the reference's value), or the chart's name. */ -}}
{{- define "vccm.serviceAccountName" -}}
{{- (.Values.serviceAccount | default dict).name | default (include "vccm.name" .) -}}
{{- end -}}

{{- /* vccm.configMapName: the cloud-config ConfigMap: existingConfigMap, or the reference's own
  ConfigMap "cloud-config" when its config.enabled is false, or the one this chart renders. */ -}}
{{- define "vccm.configMapName" -}}
{{- $ref := include "vccm.refConfig" . | fromJson -}}
{{- if .Values.existingConfigMap -}}{{ .Values.existingConfigMap }}
{{- else if and (hasKey $ref "enabled") (not $ref.enabled) (not .Values.vcenters) -}}cloud-config
{{- else if $ref.enabled -}}{{ $ref.name | default "vsphere-cloud-config" }}
{{- else -}}vsphere-cloud-config
{{- end -}}
{{- end -}}

{{- /* vccm.vcenters: vcenters, or the reference chart's single vCenter (config.enabled: config.vcenter,
  datacenter, thumbprint or caFile, else insecure as its chart renders it; username and password). JSON. */ -}}
{{- define "vccm.vcenters" -}}
{{- $ref := include "vccm.refConfig" . | fromJson -}}
{{- if .Values.vcenters -}}{{ .Values.vcenters | toJson }}
{{- else if $ref.enabled -}}
{{- $vc := dict "server" (required "config.vcenter is required with config.enabled" $ref.vcenter) -}}
{{- with $ref.datacenter }}{{ $_ := set $vc "datacenters" (list .) }}{{ end -}}
{{- if $ref.thumbprint }}{{ $_ := set $vc "thumbprint" $ref.thumbprint }}
{{- else if $ref.caFile }}{{ $_ := set $vc "caFile" $ref.caFile }}
{{- else }}{{ $_ := set $vc "insecureFlag" true }}{{ end -}}
{{- with $ref.username }}{{ $_ := set $vc "username" . }}{{ end -}}
{{- with $ref.password }}{{ $_ := set $vc "password" . }}{{ end -}}
{{- dict ($ref.vcenter | toString) $vc | toJson -}}
{{- else -}}{}
{{- end -}}
{{- end -}}

{{- /* vccm.credentials: the credential Secret's name and whether the chart creates it; the reference
  chart's config.secret when its config is used. JSON. */ -}}
{{- define "vccm.credentials" -}}
{{- $ref := include "vccm.refConfig" . | fromJson -}}
{{- if and $ref.enabled (not .Values.vcenters) -}}
{{- $s := $ref.secret | default dict -}}
{{- dict "secretName" ($s.name | default "vsphere-cloud-secret") "create" (hasKey $s "create" | ternary $s.create true) | toJson -}}
{{- else if or .Values.existingConfigMap (and (hasKey $ref "enabled") (not .Values.vcenters)) -}}
{{- /* Your own cloud-config names its Secret: none is created; credentials.secretName (and the reference's
  config.secret.name) may be read. */ -}}
{{- dict "secretName" .Values.credentials.secretName "create" false | toJson -}}
{{- else -}}
{{- .Values.credentials | toJson -}}
{{- end -}}
{{- end -}}
