package config

import (
	"fmt"
	"strings"
)

// A legacy key is one that a provider our users come from defined, which
// this CCM has no use for. The reference CCM reads its INI file with gcfg's
// FatalOnly and its YAML without strict mode, so it ignores every key it
// does not know; this CCM ignores these (and only these) the same way, with
// a warning that names them. Any other unknown key is an error.
//
// Keys are compared after normalizeKey (case and separators dropped).
type legacyOrigin struct {
	keys []string
	from string
}

var legacySections = map[string][]legacyOrigin{
	// Sections, at the top of an INI file ([Name] or [Name "sub"]). The
	// in-tree provider's [Workspace], [Disk] and [Network] are dropped
	// earlier, by readINI.
	"": {
		{[]string{"topologycategory", "netpermissions", "snapshot", "filevolume"}, "the vSphere CSI driver's config"},
	},
	"global": {
		{[]string{"datacenter", "datastore", "workingdir", "vmuuid", "vmname"}, "the in-tree vSphere provider"},
		{[]string{"serviceaccount", "secretnotmanaged"}, "earlier releases of the reference CCM"},
		{[]string{"clusterid", "clusterdistribution", "querylimit", "listvolumethreshold",
			"csifetchpreferreddatastoresintervalinmin", "cnsregistervolumescleanupintervalinmin",
			"supervisorid", "mgmtclusterid"}, "the vSphere CSI driver's config"},
	},
	"vcenter": {
		{[]string{"targetvsanfilesharedatastoreurls", "targetvsanfileshareclusters", "migrationdatastoreurl",
			"filevolumeactivated", "mgmtclusterid"}, "the vSphere CSI driver's config"},
	},
	"labels": {
		{[]string{"topologycategories"}, "the vSphere CSI driver's config"},
	},
}

// legacyKey tells whether an unknown key is one to ignore with a warning,
// and the warning.
func legacyKey(format Format, path, key string, fields []schemaField) (string, bool) {
	if format == FormatYAML {
		// The INI spelling of a known key inside YAML (the reference's
		// chart writes ca-file:): the reference ignores it.
		for _, f := range fields {
			if f.iniName != "-" && f.yamlName != "-" && strings.EqualFold(f.iniName, key) && f.yamlName != key {
				return fmt.Sprintf("%q is the INI spelling of %s and is ignored in YAML, as the reference CCM ignores it; rename it %s to use it", key, f.yamlName, f.yamlName), true
			}
		}
	}
	section := path
	if strings.HasPrefix(path, "vcenter[") {
		section = "vcenter"
	}
	norm := normalizeKey(key)
	for _, o := range legacySections[section] {
		for _, k := range o.keys {
			if k == norm {
				what := "key"
				if section == "" {
					what = "section"
				}
				return fmt.Sprintf("%s %q belongs to %s and has no effect here; ignored (as the reference CCM ignores it); remove it when convenient", what, key, o.from), true
			}
		}
	}
	return "", false
}
