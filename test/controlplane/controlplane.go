// Package controlplane runs a real etcd and kube-apiserver on 127.0.0.1
// for end-to-end tests and the demo. The binaries are built from the Go
// module proxy by hack/build-control-plane.sh and cached by version.
package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Binaries runs hack/build-control-plane.sh (which builds etcd and
// kube-apiserver on first use, showing progress on progress) and returns
// the directory that holds them. repoRoot is the repository root.
func Binaries(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "hack", "build-control-plane.sh"))
	cmd.Stdout = &out
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/build-control-plane.sh: %w", err)
	}
	lines := strings.Fields(out.String())
	if len(lines) == 0 {
		return "", errors.New("hack/build-control-plane.sh printed no directory")
	}
	return lines[len(lines)-1], nil
}

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	// Dir holds the certificates, data, logs and the kubeconfig.
	Dir string
	// Kubeconfig is an admin (system:masters) kubeconfig.
	Kubeconfig string
	// URL is the API server's address.
	URL string
	// Config is the admin REST config.
	Config *rest.Config

	procs  []*exec.Cmd
	names  []string        // of procs, in order
	exited []chan struct{} // of procs, in order: closed when it exits
}

// Start starts etcd and kube-apiserver from binDir with state in dir and
// waits until the API server is ready. Their ports are chosen free, then
// bound by the processes: another process (a test running in parallel,
// an outgoing connection) may take one in between. A process that exits
// because its port is taken is started again on new ports, twice at most.
func Start(ctx context.Context, binDir, dir string) (*ControlPlane, error) {
	return startOn(ctx, binDir, dir, freePorts)
}

// startOn is Start with the ports chosen by ports.
func startOn(ctx context.Context, binDir, dir string, ports func(n int) ([]int, error)) (*ControlPlane, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p, err := writePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	for attempt := 1; ; attempt++ {
		cp, err := start(ctx, binDir, dir, p, ports)
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return cp, err
		}
		if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
			return nil, err
		}
	}
}

// errPortTaken: a process exited because its port was taken.
var errPortTaken = errors.New("address already in use")

// start makes one attempt of Start.
func start(ctx context.Context, binDir, dir string, p *pki, free func(n int) ([]int, error)) (*ControlPlane, error) {
	ports, err := free(3)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, URL: "https://127.0.0.1:" + strconv.Itoa(ports[2])}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := cp.spawn(filepath.Join(binDir, "etcd"), "etcd",
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdClient, "--advertise-client-urls="+etcdClient,
		"--listen-peer-urls="+etcdPeer, "--initial-advertise-peer-urls="+etcdPeer,
		"--initial-cluster=e2e="+etcdPeer, "--heartbeat-interval=10", "--election-timeout=100",
		"--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return nil, err
	}
	audit, err := writeAuditPolicy(dir)
	if err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.spawn(filepath.Join(binDir, "kube-apiserver"), "kube-apiserver", append(audit,
		"--etcd-servers="+etcdClient,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--tls-cert-file="+p.serverCert, "--tls-private-key-file="+p.serverKey,
		"--client-ca-file="+p.caFile,
		"--service-account-key-file="+p.saPub, "--service-account-signing-key-file="+p.saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/24",
		"--authorization-mode=Node,RBAC",
		// Bootstrap tokens (kube-system Secrets of type
		// bootstrap.kubernetes.io/token), as kubeadm's clusters have them.
		"--enable-bootstrap-token-auth",
		"--enable-priority-and-fairness=false",
		"--v=1")...); err != nil {
		cp.Stop()
		return nil, err
	}
	cp.Config = &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.caCert, CertData: p.adminCert, KeyData: p.adminKey}}
	cp.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, cp.URL, p); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.waitReady(ctx, p); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// Client returns an admin clientset.
func (cp *ControlPlane) Client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cp.Config)
}

func (cp *ControlPlane) spawn(bin, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(cp.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	cp.procs = append(cp.procs, cmd)
	cp.names = append(cp.names, name)
	cp.exited = append(cp.exited, exited)
	return nil
}

// exitedProcess returns an error naming a process of cp that has exited,
// errPortTaken if its log says its port was taken; nil if all run.
func (cp *ControlPlane) exitedProcess() error {
	for i, done := range cp.exited {
		select {
		case <-done:
		default:
			continue
		}
		logPath := filepath.Join(cp.Dir, cp.names[i]+".log")
		log, _ := os.ReadFile(logPath)
		err := fmt.Errorf("%s exited (%v); log tail:\n%s", cp.names[i], cp.procs[i].ProcessState, tail(log, 2000))
		if bytes.Contains(log, []byte(errPortTaken.Error())) {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return err
	}
	return nil
}

// PIDs are the process IDs of the control plane's processes (etcd,
// kube-apiserver, and those Start* added), by name.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for i, c := range cp.procs {
		select {
		case <-cp.exited[i]: // reaped: its PID may be another process's now
		default:
			out[cp.names[i]] = c.Process.Pid
		}
	}
	return out
}

func (cp *ControlPlane) waitReady(ctx context.Context, p *pki) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caCert)
	cert, err := tls.X509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := hc.Get(cp.URL + "/readyz")
		if err == nil {
			res.Body.Close()
		}
		// An exit first: a ready answer may be another test's API server,
		// or ours on another test's etcd, had a port been taken.
		if err := cp.exitedProcess(); err != nil {
			return err
		}
		if err == nil && res.StatusCode == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(cp.Dir, "kube-apiserver.log"))
			return fmt.Errorf("kube-apiserver not ready after 60s (last error %v); log tail:\n%s", err, tail(log, 2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Stop stops the API server, then etcd (only the processes it started).
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		c, done := cp.procs[i], cp.exited[i]
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	cp.procs, cp.names, cp.exited = nil, nil, nil
}

func writeKubeconfig(path, server string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caCert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCert, ClientKeyData: p.adminKey}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
