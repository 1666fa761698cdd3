package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/k8s"
)

// TestInformerCacheDropsUnreadFields: the controller's caches hold the
// objects the API server serves, less their managedFields (and a Node's
// image list): nothing else is dropped, and the log states what that saves
// on the MIG example's slices as the API server writes them.
func TestInformerCacheDropsUnreadFields(t *testing.T) {
	c := newCluster(t)
	c.createPool(example(t, "mig-a100"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cache := k8s.NewCache(c.admin, k8s.Options{})
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	served, err := c.admin.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(served.Items) == 0 {
		t.Fatal("no slices")
	}
	var servedBytes, keptBytes int
	for i := range served.Items {
		s := &served.Items[i]
		cached, err := cache.Slices.Get(s.Name)
		must(t, err)
		if len(s.ManagedFields) == 0 {
			t.Fatalf("slice %s: the API server wrote no managedFields; nothing to compare", s.Name)
		}
		if cached.ManagedFields != nil {
			t.Errorf("slice %s: the cache holds its managedFields", s.Name)
		}
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(cached)
		servedBytes, keptBytes = servedBytes+len(a), keptBytes+len(b)
		s.ManagedFields = nil
		if !equality.Semantic.DeepEqual(s, cached) {
			t.Errorf("slice %s: the cache differs from the server beyond managedFields", s.Name)
		}
	}
	t.Logf("%d ResourceSlices: %d bytes as served, %d as cached (%.0f %% dropped)", len(served.Items), servedBytes, keptBytes, 100*float64(servedBytes-keptBytes)/float64(servedBytes))
}
