// Command kube-controller-manager is the Kubernetes controller manager from
// k8s.io/kubernetes, built for the end-to-end suite (the resourceclaim
// controller creates claims from pods' ResourceClaimTemplates).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
