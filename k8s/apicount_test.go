package k8s

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestRequestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/pods":                            "pods",
		"/api/v1/namespaces/ns/pods/p":            "pods",
		"/api/v1/namespaces/ns/pods/p/status":     "pods/status",
		"/api/v1/namespaces/ns":                   "namespaces",
		"/api/v1/nodes/n1":                        "nodes",
		"/apis/resource.k8s.io/v1/resourceslices": "resourceslices",
		"/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status": "resourceclaims/status",
		"/apis/coordination.k8s.io/v1/namespaces/x/leases/drasat":        "leases",
		"/healthz": "other",
		"/apis":    "other",
	} {
		if got := requestResource(path); got != want {
			t.Errorf("requestResource(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestCountRequests sends requests through a counted client to a server
// that answers them and reads the counter.
func TestCountRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	CountRequests(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := nodeGets(t)
	for range 3 {
		if _, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodeGets(t) - before; got != 3 {
		t.Errorf("counted %v node gets, want 3", got)
	}
}

func nodeGets(t *testing.T) float64 {
	var m dto.Metric
	if err := apiRequests.WithLabelValues("get", "nodes").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
