// Command kube-scheduler is the Kubernetes scheduler from k8s.io/kubernetes,
// built for the end-to-end suite.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
