// Package vcsim starts several simulated vCenters in-process (govmomi's
// simulator, with the vAPI tagging endpoints) for tests, benchmarks and the
// demo.
//
// Every vCenter of a Fleet has its own inventory with distinct names, unique
// BIOS and instance UUIDs, guest IPs (IPv4 and IPv6) and host names, its own
// TLS certificate signed by the fleet's CA, a login whose password can be
// changed and whose failed attempts are counted on the server side, and a TCP
// front on a fixed 127.0.0.1 port that can be taken down, hung and brought
// back with all state kept.
package vcsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/sim25"
	"github.com/vmware/govmomi/vapi/rest"
	_ "github.com/vmware/govmomi/vapi/simulator" // registers the /rest tagging endpoints
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// The administrator login used by the helper itself. It is never counted
// as a login of the system under test.
const (
	adminUser     = "vcsim-admin@vsphere.local"
	adminPassword = "vcsim-admin-password"
)

// Spec describes one simulated vCenter.
type Spec struct {
	// Name is the vCenter's name in the cloud-config, for example "vc-a".
	// It prefixes every VM, host and cluster name, so names are unique across
	// a Fleet.
	Name string
	// Datacenters names the datacenters (default ["dc-1"]).
	Datacenters []string
	// Clusters is the number of clusters per datacenter (default 1).
	Clusters int
	// Hosts is the number of ESXi hosts per cluster (default 2).
	Hosts int
	// VMs is the number of VMs per cluster (default 2).
	VMs int
	// Copies adds this many VMs per cluster, copied in the simulator's
	// registry from the cluster's first VM instead of created through its
	// API (which costs tens of milliseconds each): for benchmarks with tens
	// of thousands of VMs. Clients see ordinary VMs.
	Copies int
	// Latency delays every SOAP call, like a WAN link (default none).
	Latency time.Duration
	// User and Password are the accepted login (defaults
	// "ccm@vsphere.local" and "initial-<Name>").
	User, Password string
}

func (s *Spec) defaults() {
	if len(s.Datacenters) == 0 {
		s.Datacenters = []string{"dc-1"}
	}
	if s.Clusters == 0 {
		s.Clusters = 1
	}
	if s.Hosts == 0 {
		s.Hosts = 2
	}
	if s.VMs == 0 {
		s.VMs = 2
	}
	if s.User == "" {
		s.User = "ccm@vsphere.local"
	}
	if s.Password == "" {
		s.Password = "initial-" + s.Name
	}
}

// VM is one simulated VM and where it is.
type VM struct {
	Name         string
	UUID         string // BIOS UUID, lower case
	InstanceUUID string
	Ref          types.ManagedObjectReference
	VCenter      string
	Datacenter   string
	Cluster      string
	ClusterRef   types.ManagedObjectReference
	Host         string
	HostRef      types.ManagedObjectReference
	IPv4, IPv6   string
}

// Fleet is a set of running simulated vCenters.
type Fleet struct {
	// VCenters in the order of the specs.
	VCenters []*VCenter
	// CAFile is a PEM file with the CA that signed every vCenter certificate.
	CAFile string
	dir    string
}

// Start builds and serves one simulated vCenter per spec. Call Close when
// done. Names must be unique.
func Start(ctx context.Context, specs ...Spec) (*Fleet, error) {
	dir, err := os.MkdirTemp("", "vcsim-fleet-")
	if err != nil {
		return nil, err
	}
	f := &Fleet{dir: dir, CAFile: filepath.Join(dir, "ca.pem")}
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.CAFile, ca.pem, 0o600); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, spec := range specs {
		spec.defaults()
		if spec.Name == "" || seen[spec.Name] {
			f.Close()
			return nil, fmt.Errorf("vcsim: spec %d: name %q empty or repeated", i, spec.Name)
		}
		seen[spec.Name] = true
		vc, err := startVCenter(ctx, i, spec, ca, f.CAFile)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("vcsim: vCenter %s: %w", spec.Name, err)
		}
		f.VCenters = append(f.VCenters, vc)
	}
	return f, nil
}

// VCenter returns the vCenter with the given name, or nil.
func (f *Fleet) VCenter(name string) *VCenter {
	for _, vc := range f.VCenters {
		if vc.Name == name {
			return vc
		}
	}
	return nil
}

// VMs lists every VM of every vCenter.
func (f *Fleet) VMs() []VM {
	var out []VM
	for _, vc := range f.VCenters {
		out = append(out, vc.VMs...)
	}
	return out
}

// Close stops every vCenter and removes the temporary files.
func (f *Fleet) Close() {
	for _, vc := range f.VCenters {
		vc.close()
	}
	_ = os.RemoveAll(f.dir)
}

// VCenter is one running simulated vCenter.
type VCenter struct {
	Spec
	// Host and Port are where clients connect (the TCP front).
	Host string
	Port int
	// CAFile is the PEM CA bundle that verifies this vCenter's certificate.
	CAFile string
	// Thumbprint is the SHA-256 thumbprint of its certificate.
	Thumbprint string
	// Certificate is its serving certificate.
	Certificate *x509.Certificate
	// VMs lists its VMs in a stable order.
	VMs []VM
	// Model is the simulator model, for tests that need to go deeper.
	Model *simulator.Model

	server *simulator.Server
	ca     *authority
	guard  *pollGuard
	front  *front
	admin  *vim25.Client
	rest   *rest.Client
	tokens *tokenBook // STS tokens and the sessions opened with them
	// visibility: what the system under test cannot see (Hide, Unhide).
	visibility *visibility

	// tagging serializes Tag's find-or-create of categories and tags:
	// two concurrent Tags would both create one (already_exists).
	tagging sync.Mutex

	mu            sync.Mutex
	password      string
	failed        []time.Time
	solutionUsers [][]byte // DER certificates STS issues tokens for
	tokensIssued  int
	tokensRefused int
	stsDown       bool // SetSTSDown
	recording     bool
	methods       methodCounts
	requests      []Request
	// sessionManagerKeys are the sessions of started SessionManagers.
	sessionManagerKeys []string
	logins             int
	tags               map[[2]string]string // category, tag -> tag ID
	cats               map[string]string    // category -> ID
}

func startVCenter(ctx context.Context, index int, spec Spec, ca *authority, caFile string) (*VCenter, error) {
	m := simulator.VPX()
	m.Datacenter = len(spec.Datacenters)
	m.Cluster = spec.Clusters
	m.ClusterHost = spec.Hosts
	m.Machine = spec.VMs
	m.Host = 0
	m.Pool = 0
	m.Portgroup = 0
	m.DelayConfig.Delay = int(spec.Latency / time.Millisecond)
	if err := m.Create(); err != nil {
		return nil, err
	}
	v := &VCenter{Spec: spec, Model: m, password: spec.Password, CAFile: caFile, ca: ca,
		tags: map[[2]string]string{}, cats: map[string]string{}, tokens: newTokenBook()}
	m.Map().SessionManager().ValidLogin = v.validLogin
	v.visibility = newVisibility(v)
	m.Map().Handler = v.visibility.handle

	cert, leaf, err := ca.issue("127.0.0.1", "localhost")
	if err != nil {
		m.Remove()
		return nil, err
	}
	v.Certificate = leaf
	v.Thumbprint = soap.ThumbprintSHA256(leaf)
	m.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	m.Service.RegisterEndpoints = true
	// A user other than simulator.DefaultLogin makes the simulator ask
	// ValidLogin, for SOAP and for REST.
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(spec.User, "see-ValidLogin")}
	// More specific than the "/sdk" NewServer registers, so it comes first.
	if m.Service.ServeMux == nil {
		m.Service.ServeMux = http.NewServeMux()
	}
	v.guard = newPollGuard(m.Service.ServeSDK)
	m.Service.ServeMux.Handle("POST /sdk", v.counted("SOAP", v.recorded(v.tokens.soapHandler(v.guard))))
	sts := v.counted("STS", v.recorded(v.stsGuard(m.Service.Listen)))
	for _, p := range stsPaths {
		m.Service.ServeMux.Handle("POST "+p, sts)
	}
	vapi := &lateHandler{}
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodPut} {
		m.Service.ServeMux.Handle(method+" /rest/", v.counted("REST", v.tokens.restHandler(v.bridgeREST(vapi))))
	}
	v.server = m.Service.NewServer()
	// The vAPI simulator, registered by NewServer for every method at
	// "/rest/": a method not wrapped above finds it.
	vapi.next, _ = m.Service.ServeMux.Handler(&http.Request{Method: http.MethodOptions, URL: &url.URL{Path: "/rest/com"}})

	v.front, err = newFront(v.server.URL.Host)
	if err != nil {
		v.close()
		return nil, err
	}
	host, port, _ := net.SplitHostPort(v.front.addr)
	v.Host = host
	v.Port, _ = strconv.Atoi(port)

	if err := v.connectAdmin(ctx); err != nil {
		v.close()
		return nil, err
	}
	if err := v.shape(index); err != nil {
		v.close()
		return nil, err
	}
	return v, nil
}

func (v *VCenter) validLogin(req *types.Login) bool {
	switch req.UserName {
	case adminUser:
		return req.Password == adminPassword
	case sessionManagerUser:
		return req.Password == sessionManagerPassword
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if req.UserName == v.User && req.Password == v.password {
		v.logins++
		return true
	}
	v.failed = append(v.failed, time.Now())
	return false
}

// connectAdmin logs the helper in directly (not through the front).
func (v *VCenter) connectAdmin(ctx context.Context) error {
	u := *v.server.URL
	u.User = nil
	sc := soap.NewClient(&u, false)
	sc.UserAgent = adminAgent // not counted by CountMethods
	if err := sc.SetRootCAs(v.CAFile); err != nil {
		return err
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return err
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(adminUser, adminPassword)); err != nil {
		return err
	}
	rc := rest.NewClient(c)
	if err := rc.Login(ctx, url.UserPassword(adminUser, adminPassword)); err != nil {
		return err
	}
	v.admin, v.rest = c, rc
	return nil
}

// shape renames the inventory after the spec and gives every VM unique
// UUIDs, guest IPs and a host name.
func (v *VCenter) shape(index int) error {
	ctx := v.Model.Service.Context
	reg := v.Model.Map()
	rename := func(obj mo.Reference, name string, extra ...string) {
		changes := []types.PropertyChange{{Name: "name", Val: name}}
		for _, p := range extra {
			changes = append(changes, types.PropertyChange{Name: p, Val: name})
		}
		reg.AtomicUpdate(ctx, obj, changes)
	}

	dcs := reg.All("Datacenter")
	sort.Slice(dcs, func(i, j int) bool { return dcs[i].Entity().Name < dcs[j].Entity().Name })
	type place struct{ dc, cluster string }
	clusters := map[types.ManagedObjectReference]place{}
	for di, e := range dcs {
		dc := e.(*simulator.Datacenter)
		dcName := v.Datacenters[di]
		rename(dc, dcName)
		hostFolder := reg.Get(dc.HostFolder).(*simulator.Folder)
		var crs []types.ManagedObjectReference
		for _, ref := range hostFolder.ChildEntity {
			if ref.Type == "ClusterComputeResource" {
				crs = append(crs, ref)
			}
		}
		sort.Slice(crs, func(i, j int) bool {
			return reg.Get(crs[i]).(mo.Entity).Entity().Name < reg.Get(crs[j]).(mo.Entity).Entity().Name
		})
		for ci, ref := range crs {
			cr := reg.Get(ref).(*simulator.ClusterComputeResource)
			crName := fmt.Sprintf("%s-%s-c%d", v.Name, dcName, ci)
			rename(cr, crName)
			clusters[ref] = place{dcName, crName}
			hosts := append([]types.ManagedObjectReference(nil), cr.Host...)
			sort.Slice(hosts, func(i, j int) bool { return hosts[i].Value < hosts[j].Value })
			for hi, h := range hosts {
				rename(reg.Get(h), fmt.Sprintf("%s-esx%d.example.test", crName, hi), "summary.config.name")
			}
		}
	}

	if v.Copies > 0 {
		v.copyVMs(reg)
	}
	vms := reg.All("VirtualMachine")
	sort.Slice(vms, func(i, j int) bool { return vms[i].Entity().Name < vms[j].Entity().Name })
	perCluster := map[types.ManagedObjectReference]int{}
	for _, e := range vms {
		vm := e.(*simulator.VirtualMachine)
		pool := reg.Get(*vm.ResourcePool).(*simulator.ResourcePool)
		crRef := pool.Owner
		p, ok := clusters[crRef]
		if !ok {
			continue // not in a cluster: the helper builds none
		}
		n := perCluster[crRef]
		perCluster[crRef]++
		ci := clusterIndex(p.cluster)
		di := indexOf(v.Datacenters, p.dc)
		name := fmt.Sprintf("%s-vm%d", p.cluster, n)
		uuid := fmt.Sprintf("42%02x%02x%02x-%04x-4%03x-8000-%012x", index, di, ci, n, index, len(v.VMs))
		iuuid := fmt.Sprintf("50%02x%02x%02x-%04x-4%03x-9000-%012x", index, di, ci, n, index, len(v.VMs))
		// 10.<vCenter,datacenter>.<cluster,VM/250>.<VM%250+2>: unique for up to
		// 16 vCenters x 16 datacenters x 16 clusters x 4000 VMs.
		ipv4 := fmt.Sprintf("10.%d.%d.%d", index*16+di, ci*16+n/250, n%250+2)
		ipv6 := fmt.Sprintf("fd00:%x:%x:%x::%x", index, di, ci, n+2)
		rename(vm, name, "config.name", "summary.config.name")
		reg.AtomicUpdate(ctx, vm, []types.PropertyChange{
			{Name: "config.uuid", Val: uuid},
			{Name: "summary.config.uuid", Val: uuid},
			{Name: "config.instanceUuid", Val: iuuid},
			{Name: "summary.config.instanceUuid", Val: iuuid},
		})
		host := reg.Get(*vm.Runtime.Host).(*simulator.HostSystem)
		rec := VM{Name: name, UUID: uuid, InstanceUUID: iuuid, Ref: vm.Self, VCenter: v.Name,
			Datacenter: p.dc, Cluster: p.cluster, ClusterRef: crRef, Host: host.Name, HostRef: host.Self,
			IPv4: ipv4, IPv6: ipv6}
		v.SetGuest(rec.Ref, name, []types.GuestNicInfo{{
			Network: "VM Network", IpAddress: []string{ipv4, ipv6}, Connected: true,
			DeviceConfigId: 4000, MacAddress: fmt.Sprintf("00:50:56:%02x:%02x:%02x", index*16+di, ci*16+n/256, n%256),
		}})
		v.VMs = append(v.VMs, rec)
	}
	return nil
}

// copyVMs adds Spec.Copies VMs per cluster, each a copy of the cluster's
// first VM with its own reference, config and guest info, in the same
// folder, pool and host.
func (v *VCenter) copyVMs(reg *simulator.Registry) {
	first := map[types.ManagedObjectReference]*simulator.VirtualMachine{}
	for _, e := range reg.All("VirtualMachine") {
		vm := e.(*simulator.VirtualMachine)
		pool := reg.Get(*vm.ResourcePool).(*simulator.ResourcePool)
		if f, ok := first[pool.Owner]; !ok || vm.Name < f.Name {
			first[pool.Owner] = vm
		}
	}
	for _, src := range first {
		folder := reg.Get(*src.Parent).(*simulator.Folder)
		for range v.Copies {
			vm := &simulator.VirtualMachine{VirtualMachine: src.VirtualMachine}
			cfg, guest := *src.Config, *src.Guest
			vm.Config, vm.Guest = &cfg, &guest
			reg.NewEntity(vm)
			folder.ChildEntity = append(folder.ChildEntity, vm.Self)
			reg.PutEntity(folder, vm)
		}
	}
}

func clusterIndex(name string) int {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == 'c' {
			n, _ := strconv.Atoi(name[i+1:])
			return n
		}
	}
	return 0
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// SetGuest sets what VMware Tools would report: the host name, the NICs,
// and guest.ipAddress (the first IP of the first NIC).
func (v *VCenter) SetGuest(vm types.ManagedObjectReference, hostname string, nics []types.GuestNicInfo) {
	ip := ""
	if len(nics) > 0 && len(nics[0].IpAddress) > 0 {
		ip = nics[0].IpAddress[0]
	}
	obj := v.Model.Map().Get(vm)
	v.Model.Map().AtomicUpdate(v.Model.Service.Context, obj, []types.PropertyChange{
		{Name: "guest.net", Val: nics},
		{Name: "guest.ipAddress", Val: ip},
		{Name: "guest.hostName", Val: hostname},
		{Name: "summary.guest.ipAddress", Val: ip},
		{Name: "summary.guest.hostName", Val: hostname},
	})
}

// Datacenter returns the reference of the named datacenter (zero if none).
func (v *VCenter) Datacenter(name string) types.ManagedObjectReference {
	for _, e := range v.Model.Map().All("Datacenter") {
		if e.Entity().Name == name {
			return e.Reference()
		}
	}
	return types.ManagedObjectReference{}
}

// HostFolder is the host folder of the named datacenter (the parent of
// its clusters and standalone hosts).
func (v *VCenter) HostFolder(datacenter string) types.ManagedObjectReference {
	if dc, ok := v.Model.Map().Get(v.Datacenter(datacenter)).(*simulator.Datacenter); ok {
		return dc.HostFolder
	}
	return types.ManagedObjectReference{}
}

// ResourcePool is the resource pool a VM runs in.
func (v *VCenter) ResourcePool(vm types.ManagedObjectReference) types.ManagedObjectReference {
	if m, ok := v.Model.Map().Get(vm).(*simulator.VirtualMachine); ok && m.ResourcePool != nil {
		return *m.ResourcePool
	}
	return types.ManagedObjectReference{}
}

// RootFolder is the inventory's root folder.
func (v *VCenter) RootFolder() types.ManagedObjectReference {
	return v.Model.ServiceContent.RootFolder
}

// SetUUID changes a VM's BIOS UUID (the simulator's ReconfigVM does not
// notify property collectors of it).
func (v *VCenter) SetUUID(vm types.ManagedObjectReference, uuid string) {
	v.Model.Map().AtomicUpdate(v.Model.Service.Context, v.Model.Map().Get(vm), []types.PropertyChange{
		{Name: "config.uuid", Val: uuid},
		{Name: "summary.config.uuid", Val: uuid},
	})
}

// SetTemplate marks a VM as a template or a VM again, as vCenter reports
// it (the simulator's MarkAsTemplate and MarkAsVirtualMachine do not
// notify property collectors of it).
func (v *VCenter) SetTemplate(vm types.ManagedObjectReference, template bool) {
	v.Model.Map().AtomicUpdate(v.Model.Service.Context, v.Model.Map().Get(vm), []types.PropertyChange{
		{Name: "config.template", Val: template},
		{Name: "summary.config.template", Val: template},
	})
}

// SetConnectionState sets a VM's runtime.connectionState, as vCenter
// reports it for a VM whose files or host cannot be reached
// (inaccessible, orphaned, invalid, disconnected).
func (v *VCenter) SetConnectionState(vm types.ManagedObjectReference, st types.VirtualMachineConnectionState) {
	v.Model.Map().AtomicUpdate(v.Model.Service.Context, v.Model.Map().Get(vm), []types.PropertyChange{
		{Name: "runtime.connectionState", Val: st},
		{Name: "summary.runtime.connectionState", Val: st},
	})
}

// Server is the address clients put in the config's server field.
func (v *VCenter) Server() string { return v.Host }

// URL is the SDK URL through the front.
func (v *VCenter) URL() *url.URL {
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(v.Host, strconv.Itoa(v.Port)), Path: "/sdk"}
}

// Admin returns a SOAP client logged in as the helper's administrator,
// connected directly (it keeps working while the front is down).
func (v *VCenter) Admin() *vim25.Client { return v.admin }

// AdminREST returns the administrator's vAPI REST client.
func (v *VCenter) AdminREST() *rest.Client { return v.rest }

// SetPassword changes the accepted password of Spec.User. Existing sessions
// stay valid, as on a real vCenter.
func (v *VCenter) SetPassword(p string) {
	v.mu.Lock()
	v.password = p
	v.mu.Unlock()
}

// CurrentPassword is the password accepted now (Spec.Password until
// SetPassword).
func (v *VCenter) CurrentPassword() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.password
}

// FailedLogins returns when each rejected login of Spec.User happened.
func (v *VCenter) FailedLogins() []time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]time.Time(nil), v.failed...)
}

// Logins is the number of successful logins of Spec.User (SOAP and REST).
func (v *VCenter) Logins() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.logins
}

// SetMode takes the vCenter down, hangs it, or brings it back.
func (v *VCenter) SetMode(m FrontMode) error { return v.front.set(m) }

// Connections counts the clients' TCP connections open to this vCenter
// (its front): sessions that were replaced must not leave theirs open.
func (v *VCenter) Connections() int { return v.front.clients() }

// SetDelay adds d to every chunk of data the front forwards, both ways,
// on open and new connections: a latency spike (0 ends it).
func (v *VCenter) SetDelay(d time.Duration) { v.front.setDelay(d) }

// SetSessionTimeout makes idle SOAP and REST sessions created from now on
// expire after d (the simulator expires them between d and 2d).
func (v *VCenter) SetSessionTimeout(ctx context.Context, d time.Duration) error {
	return sim25.SetSessionTimeout(ctx, v.admin, d)
}

// CountSessions is the number of SOAP sessions of Spec.User.
func (v *VCenter) CountSessions(ctx context.Context) (int, error) {
	keys, err := v.sessionKeys(ctx)
	return len(keys), err
}

// sessionKeys lists the SOAP sessions of the system under test: Spec.User's,
// and those of solution users and cloned sessions (any user but the
// helper's administrator).
func (v *VCenter) sessionKeys(ctx context.Context) ([]string, error) {
	v.mu.Lock()
	own := slices.Clone(v.sessionManagerKeys)
	v.mu.Unlock()
	keys, err := v.sessionKeysOf(ctx, func(user string) bool { return user != adminUser })
	return slices.DeleteFunc(keys, func(k string) bool { return slices.Contains(own, k) }), err
}

// allSessionKeys lists every SOAP session.
func (v *VCenter) allSessionKeys(ctx context.Context) ([]string, error) {
	return v.sessionKeysOf(ctx, func(string) bool { return true })
}

func (v *VCenter) sessionKeysOf(ctx context.Context, match func(user string) bool) ([]string, error) {
	var sm mo.SessionManager
	if err := mo.RetrieveProperties(ctx, v.admin, v.admin.ServiceContent.PropertyCollector,
		*v.admin.ServiceContent.SessionManager, &sm); err != nil {
		return nil, err
	}
	var keys []string
	for _, s := range sm.SessionList {
		if match(s.UserName) {
			keys = append(keys, s.Key)
		}
	}
	return keys, nil
}

// TerminateSessions ends every SOAP session of Spec.User, as an
// administrator would in the vSphere Client.
func (v *VCenter) TerminateSessions(ctx context.Context) (int, error) {
	keys, err := v.sessionKeys(ctx)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	_, err = methods.TerminateSession(ctx, v.admin, &types.TerminateSession{
		This: *v.admin.ServiceContent.SessionManager, SessionId: keys})
	return len(keys), err
}

func (v *VCenter) close() {
	if v.front != nil {
		v.front.close()
	}
	if v.server != nil {
		v.server.Close()
	}
	v.Model.Remove()
}

// ErrNoVM is returned by lookups of a VM name the vCenter does not have.
var ErrNoVM = errors.New("vcsim: no such VM")

// VM returns the VM with the given name.
func (v *VCenter) VM(name string) (VM, error) {
	for _, vm := range v.VMs {
		if vm.Name == name {
			return vm, nil
		}
	}
	return VM{}, fmt.Errorf("%w: %s in %s", ErrNoVM, name, v.Name)
}

// WriteConfig writes Config(head, per) to path, readable by its owner
// only (it holds passwords).
func (f *Fleet) WriteConfig(path, head string, per map[string][]string) error {
	return os.WriteFile(path, []byte(f.Config(head, per)), 0o600)
}

// Config returns a cloud-config (YAML) for the fleet: every vCenter with
// its address, CA file and inline credentials. head is inserted first (for
// example global:, labels: and nodes: blocks); per adds lines, indented
// for you, to the named vCenters.
func (f *Fleet) Config(head string, per map[string][]string) string {
	var b strings.Builder
	b.WriteString(head)
	if head != "" && !strings.HasSuffix(head, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("vcenter:\n")
	for _, v := range f.VCenters {
		fmt.Fprintf(&b, "  %s:\n    server: %s\n    port: %d\n    caFile: %s\n    user: %s\n    password: %s\n",
			v.Name, v.Host, v.Port, v.CAFile, v.User, v.Password)
		for _, l := range per[v.Name] {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}
