// Package csrapproval is what the CCM's certificate request approvers
// (serving-csr, kubelet-client-csr) share: the worker that takes a request
// from the queue, and the write of a decision.
package csrapproval

import (
	"context"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Next takes one request name from q and syncs it: a request that waits
// (wait) or whose sync failed is queued again after its back-off, any
// other is forgotten. It reports false once q is shut down.
func Next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) (wait bool, err error)) bool {
	name, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(name)
	wait, err := sync(ctx, name)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Request not decided; retrying", "csr", name)
		q.AddRateLimited(name)
	case wait:
		q.AddRateLimited(name)
	default:
		q.Forget(name)
	}
	return true
}

// Conclude writes an approval (or, deny, a denial) with its reason and a
// message prefixed by component, through the approval subresource, on the
// informer's copy: a request changed since conflicts, and the next sync
// sees the change.
func Conclude(ctx context.Context, kube kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest, deny bool, reason, message, component string, now metav1.Time) error {
	csr = csr.DeepCopy()
	cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue,
		Reason: reason, Message: component + ": " + message, LastUpdateTime: now}
	if deny {
		cond.Type = certificatesv1.CertificateDenied
	}
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	_, err := kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	return err
}
