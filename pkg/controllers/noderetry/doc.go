// Package noderetry lets the node-topology controller retry at once a
// Node whose initialization failed, without writing the Node.
//
// The framework's cloud node controller (k8s.io/cloud-provider) queues a
// Node when its informer reports it added or updated, and after a failed
// initialization it backs off exponentially (5 ms doubling to 1000 s, and
// 10 retries a second for all Nodes together): a Node that failed because
// its vCenter's first read had not reached its VM would wait long after
// the page arrived. The framework offers no call to queue a Node. Its
// controller registers its handler on the Node informer it is given, so
// the CCM gives it a Tee's informer: the handler is registered on the
// shared informer as usual and also kept, and Retry hands it the Node as
// an update, which queues the Node at once. Before, the CCM wrote an
// annotation on the Node for this (one Node write per retry, which the API
// server, etcd and every Node watcher paid); that annotation remains the
// fallback should no handler be kept (a framework that registers its
// handler otherwise). A node controller in another process is no case
// for it: the failed initializations the node-topology controller retries
// are recorded by the node controller's own calls into this provider.
package noderetry
