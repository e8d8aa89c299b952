package configrollout

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// RecordsAnnotation holds every replica's record, as JSON, on the Lease
// named RecordsLease(group). One object for all replicas, so that the
// controller manager's role names the Leases it may write
// (resourceNames) instead of every Lease of its namespace, where other
// components' leader leases are.
const RecordsAnnotation = "vsphere.vsphere-ccm.io/replicas"

// RecordsLease is the name of the Lease that holds the records of the
// replicas sharing the leader lease group.
func RecordsLease(group string) string { return group + "-config" }

// entry is one replica's record as stored.
type entry struct {
	Hash     string    `json:"hash"`
	Renewed  time.Time `json:"renewed"`
	Leading  bool      `json:"leading,omitempty"`
	Stopping bool      `json:"stopping,omitempty"`
}

// record is one replica's published state.
type record struct {
	pod string
	entry
}

// live: renewed within fresh, and not stopping.
func (r record) live(now time.Time, fresh time.Duration) bool {
	return !r.Stopping && now.Sub(r.Renewed) <= fresh
}

// records reads and writes the records of a group.
type records struct {
	kube      kubernetes.Interface
	ns, group string
	// forget is how long a record that is not renewed is kept.
	forget time.Duration
}

// publish writes r into the group's Lease (created the first time),
// dropping the records not renewed within forget.
func (s records) publish(ctx context.Context, r record) error {
	leases := s.kube.CoordinationV1().Leases(s.ns)
	name := RecordsLease(s.group)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}}
		case err != nil:
			return err
		}
		all := decode(l)
		for pod, e := range all {
			if r.Renewed.Sub(e.Renewed) > s.forget {
				delete(all, pod)
			}
		}
		all[r.pod] = r.entry
		b, err := json.Marshal(all)
		if err != nil {
			return err
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[RecordsAnnotation] = string(b)
		holder, renewed := r.pod, metav1.NewMicroTime(r.Renewed)
		l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &renewed
		if create {
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(coordinationv1.Resource("leases"), name, err)
			}
			return err
		}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("config records %s/%s: %w", s.ns, name, err)
	}
	return nil
}

// list reads every record of the group, by Pod name.
func (s records) list(ctx context.Context) ([]record, error) {
	l, err := s.kube.CoordinationV1().Leases(s.ns).Get(ctx, RecordsLease(s.group), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config records %s/%s: %w", s.ns, RecordsLease(s.group), err)
	}
	all := decode(l)
	out := make([]record, 0, len(all))
	for _, pod := range slices.Sorted(maps.Keys(all)) {
		out = append(out, record{pod: pod, entry: all[pod]})
	}
	return out, nil
}

// decode reads the records of a Lease; an annotation that does not parse
// (written by hand) counts as none, and is replaced at the next publish.
func decode(l *coordinationv1.Lease) map[string]entry {
	all := map[string]entry{}
	if v := l.Annotations[RecordsAnnotation]; v != "" {
		if err := json.Unmarshal([]byte(v), &all); err != nil {
			return map[string]entry{}
		}
	}
	return all
}
