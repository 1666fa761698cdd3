package k8s

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// apiRequests counts the requests drasat's clients send to the API server,
// by verb and resource: what a pass costs the API server, per claim, is
// read from it (the load test divides it by the claims allocated). One
// counter for the process, since the clients are made before the metrics.
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drasat_api_requests_total",
	Help: "Requests drasat's API clients sent, by verb (get, list, watch, create, update, patch, delete) and resource (with its subresource, e.g. resourceclaims/status)."},
	[]string{"verb", "resource"})

// CountRequests makes the clients built from cfg count their requests in
// drasat_api_requests_total.
func CountRequests(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} })
}

type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	apiRequests.WithLabelValues(requestVerb(req), requestResource(req.URL.Path)).Inc()
	return t.next.RoundTrip(req)
}

// requestVerb is the request's verb as the API server names it, but for
// get and list, which the path alone does not tell apart: both are "get".
func requestVerb(req *http.Request) string {
	switch req.Method {
	case http.MethodGet:
		if req.URL.Query().Get("watch") == "true" {
			return "watch"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	}
	return strings.ToLower(req.Method)
}

// requestResource is the resource a request path names, with its
// subresource: /apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status
// is "resourceclaims/status"; paths outside /api and /apis are "other".
func requestResource(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return "other"
	}
	if len(segs) > 2 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	res := segs[0]
	if len(segs) >= 3 {
		res += "/" + segs[2]
	}
	return res
}
