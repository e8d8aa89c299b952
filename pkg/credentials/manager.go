package credentials

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/notify"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// ErrNoCredentials means no configured source has credentials for a vCenter.
var ErrNoCredentials = errors.New("no credentials")

// ErrSessionManagerRefused means a session manager found in a source would
// receive a bearer token where it must not: over plain http without
// sessionManagerAllowHTTP, or the Pod's service-account token at a URL
// that a Secret (not the cloud-config) names.
var ErrSessionManagerRefused = errors.New("session manager refused")

// Options tunes a Manager. The zero value is usable.
type Options struct {
	// Client reads and watches Secrets. Required when any vCenter names a Secret.
	Client kubernetes.Interface
	// DirectoryPollInterval is how often the secrets directory is re-read
	// (default 10s).
	DirectoryPollInterval time.Duration
	// SyncTimeout bounds how long Start waits for the Secrets (default 30s).
	SyncTimeout time.Duration
}

// Manager holds the current credentials of every source and keeps them
// current: named Secrets are watched by informers scoped to exactly their
// namespace and name, the secrets directory is re-read periodically. What a
// source holds now is the truth: a removed key, an incomplete entry or a
// deleted Secret is forgotten at once (the next source in precedence
// applies). Only a directory that cannot be read keeps its last values.
type Manager struct {
	cfg  *config.Config
	opts Options

	mu      sync.RWMutex
	secrets map[config.SecretRef]Set // last known good entries per Secret
	dir     Set
	changed notify.Notifier                           // on every change
	read    map[config.SecretRef]cache.InformerSynced // whether each Secret has been read once

	wg        sync.WaitGroup // the directory poll
	factories []informers.SharedInformerFactory
}

// New returns a Manager for cfg; call Start before Get.
func New(cfg *config.Config, opts Options) *Manager {
	if opts.DirectoryPollInterval <= 0 {
		opts.DirectoryPollInterval = 10 * time.Second
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	return &Manager{cfg: cfg, opts: opts, secrets: map[config.SecretRef]Set{}}
}

// refs lists every Secret the config names, once.
func (m *Manager) refs() []config.SecretRef {
	seen := map[config.SecretRef]bool{}
	var out []config.SecretRef
	for _, vc := range m.cfg.VCenters {
		for _, r := range []*config.SecretRef{vc.Credentials.Secret, vc.Credentials.GlobalSecret} {
			if r != nil && !seen[*r] {
				seen[*r] = true
				out = append(out, *r)
			}
		}
	}
	return out
}

// Start starts watching every source until ctx ends and returns at once
// (the secrets directory is read before it returns). A vCenter whose
// Secret is not loaded yet has no credentials until it is; Changed fires
// then. It fails only when Secrets are configured without a client.
func (m *Manager) Start(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("credentials")
	refs := m.refs()
	if len(refs) > 0 && m.opts.Client == nil {
		return fmt.Errorf("credentials: the config names Secrets (%v) but no Kubernetes client was given", refs)
	}
	m.mu.Lock()
	m.read = map[config.SecretRef]cache.InformerSynced{}
	for _, ref := range refs {
		m.read[ref] = m.watchSecret(ctx, log, ref)
	}
	m.mu.Unlock()
	if dir := m.cfg.Global.SecretsDirectory; dir != "" {
		m.readDirectory(log, dir)
		m.wg.Go(func() { m.pollDirectory(ctx, log, dir) })
	}
	return nil
}

// Wait waits, after the context given to Start has ended, for the Secret
// watches and the directory poll to stop.
func (m *Manager) Wait() {
	m.wg.Wait()
	m.mu.RLock()
	factories := slices.Clone(m.factories)
	m.mu.RUnlock()
	for _, f := range factories {
		f.Shutdown()
	}
}

// WaitLoaded waits until every Secret the config names has been read once
// (or found absent), or ctx ends.
func (m *Manager) WaitLoaded(ctx context.Context) error {
	m.mu.RLock()
	synced := slices.Collect(maps.Values(m.read))
	m.mu.RUnlock()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("credentials: Secrets %v not read: %w", m.refs(), ctx.Err())
	}
	return nil
}

// StartAndWait is Start, then a wait of at most SyncTimeout for the
// Secrets. The watches keep running and retrying in the background after
// an error.
func (m *Manager) StartAndWait(ctx context.Context) error {
	if err := m.Start(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, m.opts.SyncTimeout)
	defer cancel()
	return m.WaitLoaded(wctx)
}

func (m *Manager) watchSecret(ctx context.Context, log klog.Logger, ref config.SecretRef) cache.InformerSynced {
	factory := informers.NewSharedInformerFactoryWithOptions(m.opts.Client, 0,
		informers.WithNamespace(ref.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + ref.Name }))
	inf := factory.Core().V1().Secrets().Informer()
	log = log.WithValues("secret", ref.String())
	update := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != ref.Name || s.Namespace != ref.Namespace {
			return
		}
		set, warnings, err := ParseData(s.Data)
		for _, w := range warnings {
			log.Info("Warning: Secret key ignored", "detail", w)
		}
		if err != nil {
			log.Error(err, "Secret has incomplete credentials; those servers get none from this Secret (the next source in precedence is used) until it is fixed")
		}
		m.mu.Lock()
		if !maps.EqualFunc(set, m.secrets[ref], secret.Equal) {
			m.secrets[ref] = set // what the Secret holds now: a removed key is forgotten
			m.notifyLocked()
		}
		m.mu.Unlock()
		log.V(2).Info("Credentials loaded from Secret", "servers", len(set))
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok && s.Name == ref.Name && s.Namespace == ref.Namespace {
				log.Info("Warning: Secret deleted; its credentials are forgotten (the next source in precedence is used)")
				m.mu.Lock()
				delete(m.secrets, ref)
				m.notifyLocked()
				m.mu.Unlock()
			}
		},
	})
	if err != nil { // only when the informer has already stopped
		log.Error(err, "Cannot watch the Secret")
		return inf.HasSynced
	}
	m.factories = append(m.factories, factory)
	factory.Start(ctx.Done())
	// Read means the handler has seen the first list, not only the
	// informer's cache: WaitLoaded then guarantees Get sees the Secret.
	return reg.HasSynced
}

func (m *Manager) readDirectory(log klog.Logger, dir string) {
	raw, err := ReadDirectory(dir)
	if err != nil {
		log.Error(err, "Secrets directory unreadable; the last known credentials stay in use")
		return
	}
	set, warnings, err := ParseData(raw)
	for _, w := range warnings {
		log.Info("Warning: file in secrets directory ignored", "dir", dir, "detail", w)
	}
	if err != nil {
		log.Error(err, "Secrets directory has incomplete credentials", "dir", dir)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !maps.EqualFunc(set, m.dir, secret.Equal) {
		m.dir = set // what the directory holds now: a removed file is forgotten
		m.notifyLocked()
	}
}

func (m *Manager) pollDirectory(ctx context.Context, log klog.Logger, dir string) {
	t := time.NewTicker(m.opts.DirectoryPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.readDirectory(log, dir)
		}
	}
}

func (m *Manager) notifyLocked() {
	m.changed.Notify()
}

// Changed returns a channel closed at the next change of any source.
func (m *Manager) Changed() <-chan struct{} {
	return m.changed.C()
}

// Get returns the credentials for vc from the first source, in precedence
// order, that has them, and names that source (see Resolve).
func (m *Manager) Get(vc config.VCenter) (secret.Credentials, string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return Resolve(vc, Sources{Secrets: m.secrets, Directory: m.dir, Pending: func(ref config.SecretRef) bool {
		read := m.read[ref]
		return read != nil && !read()
	}})
}

// Sources is what the credential sources hold now.
type Sources struct {
	// Secrets is the entries of each Secret read.
	Secrets map[config.SecretRef]Set
	// Directory is the entries of the secrets directory.
	Directory Set
	// Pending reports a Secret not read yet (nil: every Secret is read).
	Pending func(config.SecretRef) bool
}

// Resolve returns the credentials of vc from the first source, in
// precedence order, that has them, and names that source. The error wraps
// ErrNoCredentials and lists each source consulted. A shared session
// without a token of its own reads the token file of vc's config (by
// default the Pod's service-account token) at every login, and only when
// the cloud-config itself names the session manager: a URL from a Secret
// or the secrets directory must come with its token. A plain http URL is
// refused unless the config allows it for vc. Both refusals wrap
// ErrSessionManagerRefused and name the source and the keys.
func Resolve(vc config.VCenter, src Sources) (secret.Credentials, string, error) {
	creds, source, err := resolve(vc, src)
	s, ok := creds.(secret.SharedSession)
	if err != nil || !ok {
		return creds, source, err
	}
	fromConfig := source == sourceInline
	if s.Insecure() && !vc.Credentials.AllowHTTP {
		where := fmt.Sprintf("%s (key %s%s)", source, vc.Server, suffixSessionURL)
		if fromConfig {
			where = "the cloud-config (sessionManagerURL)"
		}
		return nil, source, fmt.Errorf("vcenter %q: %w: the session manager URL in %s is plain http: the bearer token and the session ticket would travel in clear; use https, or allow it for this vCenter with vcenter.%s.sessionManagerAllowHTTP: true",
			vc.Name, ErrSessionManagerRefused, where, vc.Name)
	}
	if !s.Token.IsSet() && s.TokenFile == "" {
		if !fromConfig {
			return nil, source, fmt.Errorf("vcenter %q: %w: %s names a session manager (key %s%s) without its token (key %s%s): the Pod's service-account token is sent only to a session manager the cloud-config names; add the token key, or move the URL to the cloud-config (vcenter.%s.sessionManagerURL)",
				vc.Name, ErrSessionManagerRefused, source, vc.Server, suffixSessionURL, vc.Server, suffixSessionToken, vc.Name)
		}
		s.TokenFile = cmp.Or(vc.Credentials.TokenFile, config.DefaultSessionManagerTokenFile)
		creds = s
	}
	return creds, source, nil
}

// sourceInline names the cloud-config as a credential source.
const sourceInline = "inline config"

func resolve(vc config.VCenter, src Sources) (secret.Credentials, string, error) {
	var tried []string
	c := vc.Credentials
	for _, ref := range []*config.SecretRef{c.Secret, c.GlobalSecret} {
		if ref == nil {
			continue
		}
		if cr, ok := src.Secrets[*ref][vc.Server]; ok {
			return cr, "Secret " + ref.String(), nil
		}
		if src.Pending != nil && src.Pending(*ref) {
			tried = append(tried, fmt.Sprintf("Secret %s not read yet", ref))
			continue
		}
		tried = append(tried, fmt.Sprintf("Secret %s has no usable %s.username/%s.password, %s.vc-session-manager-url (or server_<id> entry)", ref, vc.Server, vc.Server, vc.Server))
	}
	if c.SecretsDirectory != "" {
		if cr, ok := src.Directory[vc.Server]; ok {
			return cr, "secrets directory " + c.SecretsDirectory, nil
		}
		tried = append(tried, fmt.Sprintf("secrets directory %s has no usable %s.username/%s.password or %s.vc-session-manager-url", c.SecretsDirectory, vc.Server, vc.Server, vc.Server))
	}
	if c.Inline != nil {
		return c.Inline, sourceInline, nil
	}
	return nil, "", fmt.Errorf("vcenter %q: %w: %v", vc.Name, ErrNoCredentials, tried)
}
