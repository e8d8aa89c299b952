package credentials

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/config"
	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/test/poll"
)

func loadConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, _, err := config.Parse("test.yaml", []byte(yaml), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func secretObj(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestPrecedenceAndRotation(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("vc-c.password", "dir-pass")
	write("vc-c.username", "dir-user")
	cfg := loadConfig(t, `
global:
  secretName: global-creds
  secretNamespace: kube-system
  secretsDirectory: `+dir+`
vcenter:
  a: {server: vc-a, secretName: a-creds}
  b: {server: vc-b}
  c: {server: vc-c}
  d: {server: vc-d, user: inline-user, password: inline-pass}
  e: {server: vc-e}
`)
	client := fake.NewClientset(
		secretObj("kube-system", "a-creds", map[string]string{"vc-a.username": "a-user", "vc-a.password": "a-pass"}),
		secretObj("kube-system", "global-creds", map[string]string{"vc-a.username": "x", "vc-a.password": "x", "vc-b.username": "b-user", "vc-b.password": "b-pass", "extra": "ignored"}),
		secretObj("kube-system", "unrelated", map[string]string{"vc-e.username": "no", "vc-e.password": "no"}),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(cfg, Options{Client: client, DirectoryPollInterval: 20 * time.Millisecond})
	if err := m.StartAndWait(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ user, pass, source string }{
		"a": {"a-user", "a-pass", "Secret kube-system/a-creds"},
		"b": {"b-user", "b-pass", "Secret kube-system/global-creds"},
		"c": {"dir-user", "dir-pass", "secrets directory " + dir},
		"d": {"inline-user", "inline-pass", "inline config"},
	}
	for name, w := range want {
		vc, _ := cfg.VCenter(name)
		got, source, err := m.Get(vc)
		if err != nil || username(got) != w.user || password(got) != w.pass || source != w.source {
			t.Errorf("%s: got %q from %q (err %v), want %q from %q", name, username(got), source, err, w.user, w.source)
		}
	}
	vcE, _ := cfg.VCenter("e")
	if _, _, err := m.Get(vcE); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("e: want ErrNoCredentials (the unrelated Secret must not be used), got %v", err)
	}

	// Rotation in a Secret, seen without a restart.
	changed := m.Changed()
	_, err := client.CoreV1().Secrets("kube-system").Update(ctx,
		secretObj("kube-system", "a-creds", map[string]string{"vc-a.username": "a-user", "vc-a.password": "a-pass-2"}), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-changed
	vcA, _ := cfg.VCenter("a")
	poll.True(t, "rotated Secret", func() bool { c, _, _ := m.Get(vcA); return password(c) == "a-pass-2" })

	// A deleted Secret is forgotten: the next source in precedence applies.
	changed = m.Changed()
	if err := client.CoreV1().Secrets("kube-system").Delete(ctx, "a-creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	<-changed
	if c, source, err := m.Get(vcA); err != nil || username(c) != "x" || source != "Secret kube-system/global-creds" {
		t.Errorf("after deletion: %q from %q (%v), want the global Secret's entry", username(c), source, err)
	}

	// Rotation in the directory.
	write("vc-c.password", "dir-pass-2")
	vcC, _ := cfg.VCenter("c")
	poll.True(t, "rotated directory", func() bool { c, _, _ := m.Get(vcC); return password(c) == "dir-pass-2" })

	// A key removed from the directory is forgotten.
	changed = m.Changed()
	if err := os.Remove(filepath.Join(dir, "vc-c.password")); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, _, err := m.Get(vcC); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("after the directory lost vc-c.password: %v, want ErrNoCredentials", err)
	}

	// An incomplete entry (a removed password key) is forgotten too; the
	// other entries of the Secret are kept.
	changed = m.Changed()
	_, err = client.CoreV1().Secrets("kube-system").Update(ctx,
		secretObj("kube-system", "global-creds", map[string]string{"vc-b.username": "b-user-3", "vc-a.username": "x", "vc-a.password": "x"}), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-changed
	vcB, _ := cfg.VCenter("b")
	if _, _, err := m.Get(vcB); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("b after its password key was removed: %v, want ErrNoCredentials", err)
	}
	if c, _, err := m.Get(vcA); err != nil || username(c) != "x" {
		t.Errorf("a after an unrelated key was removed: %q %v", username(c), err)
	}
}

func TestStartWithoutClient(t *testing.T) {
	cfg := loadConfig(t, "vcenter: {a: {server: vc-a, secretName: s, secretNamespace: ns}}")
	if err := New(cfg, Options{}).Start(context.Background()); err == nil {
		t.Fatal("want an error: Secrets configured but no client")
	}
}
