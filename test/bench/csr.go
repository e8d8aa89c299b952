package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/ccmproc"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/controlplane"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/vcsim"
)

// servingCSRs initializes n Nodes over 3 vCenters with serving certificate
// approval on, then has every Node's kubelet ask for a serving
// certificate at once (16 at a time, as client-go's csr package creates
// them, impersonating the Node), and measures the time from each
// request's creation to its approval, and the vSphere requests the CCM
// made meanwhile beyond its inventory's long polls.
//
// cold: every kubelet asks as soon as it registers, while the CCM
// initializes the Nodes: the requests wait (NodeNotInitialized) and are
// retried at every Node and inventory change, which measures what
// waiting requests cost.
func servingCSRs(ctx context.Context, e env, n int, cold bool) ([]report, error) {
	perCluster := max(n/6, 1)
	fleet, err := vcsim.Start(ctx, sixDatacenters(perCluster)...)
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	if err := fleet.TagZones(ctx); err != nil {
		return nil, err
	}
	vms := fleet.VMs()
	// Kubelets create their requests with the rights kubeadm gives the
	// system:nodes group.
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench:nodes-request-certificates"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	cfgPath := filepath.Join(e.work, "csr.yaml")
	if err := fleet.WriteConfig(cfgPath, vcsim.ZoneLabels+"nodes:\n  servingCertificates:\n    approve: true\n", nil); err != nil {
		return nil, err
	}
	p, err := ccmproc.Start(e.cp, e.ccm, cfgPath, filepath.Join(e.work, "csr-ccm.log"), map[string]string{
		"--v": "1", "--concurrent-node-syncs": "8", "--kube-api-qps": "200", "--kube-api-burst": "400",
	})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	if err := p.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	if err := p.WaitStarted(ctx, 3, 5*time.Minute); err != nil {
		return nil, err
	}
	if err := deleteNodes(ctx, e.kube); err != nil {
		return nil, err
	}
	// When each Node is initialized: a request waits for its Node's
	// initialization, which is the CCM's, not the approver's, time.
	inits, err := watchInitialized(ctx, e.kube)
	if err != nil {
		return nil, err
	}
	defer inits.stop()
	fmt.Printf("csr: registering %d nodes ...\n", len(vms))
	if err := registerAll(ctx, e.kube, vms); err != nil {
		return nil, err
	}
	if !cold {
		if err := controlplane.WaitForNodes(ctx, e.kube, len(vms), 15*time.Minute, initialized); err != nil {
			return nil, err
		}
	}
	before, err := p.ScrapeCounts()
	if err != nil {
		return nil, err
	}
	cpuBefore, err := controlplane.CPUTime(p.PID())
	if err != nil {
		return nil, err
	}

	// Watch first: every approval is seen, timed on arrival.
	csrs := e.kube.CertificatesV1().CertificateSigningRequests()
	w, err := csrs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	created := map[string]time.Time{}
	nodeOf := map[string]string{} // request -> its Node
	approvedAt := map[string]time.Time{}
	denied, relisted := 0, 0
	allApproved := make(chan struct{})
	// seen records c's decision at now; it reports whether every request
	// is decided.
	seen := func(c *certificatesv1.CertificateSigningRequest, now time.Time, late bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, cond := range c.Status.Conditions {
			if _, seen := approvedAt[c.Name]; seen {
				break
			}
			switch cond.Type {
			case certificatesv1.CertificateApproved:
				approvedAt[c.Name] = now
				if late {
					relisted++
				}
			case certificatesv1.CertificateDenied:
				approvedAt[c.Name] = time.Time{}
				denied++
			}
		}
		return len(approvedAt) == len(vms)
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go func() {
		for {
			for ev := range w.ResultChan() {
				c, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
				if !ok || (ev.Type != watch.Modified && ev.Type != watch.Added) {
					continue
				}
				if seen(c, time.Now(), false) {
					w.Stop()
					close(allApproved)
					return
				}
			}
			// Closed: the API server drops a watcher that falls behind (the
			// bench shares 2 cores with it). Listed again, the approvals
			// made meanwhile are timed now (late by the gap, counted), and
			// watched on from the list.
			if watchCtx.Err() != nil {
				return
			}
			list, err := csrs.List(watchCtx, metav1.ListOptions{})
			if err != nil {
				return
			}
			now := time.Now()
			for i := range list.Items {
				if seen(&list.Items[i], now, true) {
					close(allApproved)
					return
				}
			}
			if w, err = csrs.Watch(watchCtx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}); err != nil {
				return
			}
		}
	}()

	fmt.Printf("csr: %d kubelets ask for serving certificates ...\n", len(vms))
	start := time.Now()
	work := make(chan vcsim.VM)
	errs := make(chan error, len(vms))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for vm := range work {
				name, at, err := requestServing(ctx, e.cp.Config, vm)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", vm.Name, err)
					continue
				}
				mu.Lock()
				created[name], nodeOf[name] = at, vm.Name
				mu.Unlock()
			}
		})
	}
	for _, vm := range vms {
		work <- vm
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	select {
	case <-allApproved:
	case <-time.After(10 * time.Minute):
		return nil, fmt.Errorf("%w: %d of %d requests decided after 10 minutes", errTimeout, len(approvedAt), len(vms))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	total := time.Since(start)
	after, err := p.ScrapeCounts()
	if err != nil {
		return nil, err
	}
	cpuAfter, err := controlplane.CPUTime(p.PID())
	if err != nil {
		return nil, err
	}
	cpu := cpuAfter - cpuBefore
	mu.Lock()
	var lat, own []time.Duration
	for name, at := range approvedAt {
		if !at.IsZero() {
			lat = append(lat, at.Sub(created[name]))
			from := created[name]
			if i, ok := inits.at(nodeOf[name]); ok && i.After(from) {
				from = i
			}
			own = append(own, at.Sub(from))
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	slices.Sort(own)
	work2 := (after.SOAP - after.Polls + after.REST) - (before.SOAP - before.Polls + before.REST)
	perCSR := work2 / float64(len(vms))
	mode := "Nodes initialized first"
	if cold {
		mode = "asked at registration, while the Nodes initialize"
	}
	fmt.Printf("\nserving certificate requests: %d Nodes over 3 vCenters x 2 datacenters, %s\n", len(vms), mode)
	fmt.Printf("%-60s %12d\n", "approved", len(lat))
	fmt.Printf("%-60s %12d\n", "denied (want 0)", denied)
	fmt.Printf("%-60s %12s\n", "creation to approval, p50", seconds(quantile(lat, 0.5)))
	fmt.Printf("%-60s %12s\n", "creation to approval, p99", seconds(quantile(lat, 0.99)))
	fmt.Printf("%-60s %12s\n", "creation to approval, max", seconds(quantile(lat, 1)))
	fmt.Printf("%-60s %12s\n", "creation or the Node's initialization, if later, to approval, p50", seconds(quantile(own, 0.5)))
	fmt.Printf("%-60s %12s\n", "the same, p99", seconds(quantile(own, 0.99)))
	fmt.Printf("%-60s %12s\n", "the same, max", seconds(quantile(own, 1)))
	fmt.Printf("%-60s %12s\n", "first request created to last approved", seconds(total))
	fmt.Printf("%-60s %12d\n", "approvals timed late, at a re-list (the watch fell behind)", relisted)
	fmt.Printf("%-60s %12.0f\n", "inventory long polls meanwhile (run whatever is asked)", after.Polls-before.Polls)
	fmt.Printf("%-60s %12.4f\n", "other vSphere requests per request", perCSR)
	fmt.Printf("%-60s %12s\n", "CPU of the CCM, first request to last approved", seconds(cpu))
	return []report{
		{fmt.Sprintf("csr: creation to approval of %d serving requests (%s), p50 / max", len(vms), mode), seconds(quantile(lat, 0.5)) + " / " + seconds(quantile(lat, 1)), "-"},
		{"csr: the approver's own time (from creation, or the Node's initialization if later, to approval), p50 / max",
			seconds(quantile(own, 0.5)) + " / " + seconds(quantile(own, 1)), "2 s / 10 s"},
		{"csr: CPU of the CCM meanwhile", seconds(cpu), "-"},
		{"csr: vSphere requests per serving request (beyond long polls)", fmt.Sprintf("%.4f", perCSR), "2 x vCenters x IP SANs"},
		{"csr: serving requests denied (own names and addresses)", fmt.Sprint(denied), "0"},
	}, nil
}

// requestServing creates vm's kubelet's serving request as the kubelet
// does (client-go's util/certificate/csr, impersonating the Node), with
// the names and addresses the CCM gives its Node.
func requestServing(ctx context.Context, admin *rest.Config, vm vcsim.VM) (string, time.Time, error) {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + vm.Name, Groups: []string{"system:nodes", "system:authenticated"}}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", time.Time{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", time.Time{}, err
	}
	data, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + vm.Name, Organization: []string{"system:nodes"}},
		[]string{vm.Name}, []net.IP{net.ParseIP(vm.IPv4)})
	if err != nil {
		return "", time.Time{}, err
	}
	at := time.Now()
	name, _, err := csr.RequestCertificateWithContext(ctx, kube, data, "", certificatesv1.KubeletServingSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}, key)
	return name, at, err
}

// nodeInits records when each Node was first seen initialized.
type nodeInits struct {
	mu   sync.Mutex
	seen map[string]time.Time
	stop func()
}

func (t *nodeInits) at(node string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[node]
	return at, ok
}

// watchInitialized watches the Nodes and records when each is first seen
// initialized (on arrival of the watch event).
func watchInitialized(ctx context.Context, kube kubernetes.Interface) (*nodeInits, error) {
	w, err := kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	t := &nodeInits{seen: map[string]time.Time{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*v1.Node)
			if !ok || !initialized(n) {
				continue
			}
			now := time.Now()
			t.mu.Lock()
			if _, seen := t.seen[n.Name]; !seen {
				t.seen[n.Name] = now
			}
			t.mu.Unlock()
		}
	}()
	return t, nil
}
