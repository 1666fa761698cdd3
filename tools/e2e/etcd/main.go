// Command etcd is etcd's server, built from go.etcd.io/etcd/server/v3 for the
// end-to-end suite.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
