package driverprofile

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/yaml"
)

// YAML writes the inventory as a multi-document YAML stream: the classes,
// then the slices in publishing order, each document after a comment.
func (inv Inventory) YAML(header string) ([]byte, error) {
	var b bytes.Buffer
	if header != "" {
		for _, line := range bytes.Split([]byte(header), []byte("\n")) {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	var docs []any
	for _, c := range inv.Classes {
		docs = append(docs, c)
	}
	for _, s := range inv.Slices {
		docs = append(docs, s)
	}
	for i, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		if i > 0 || header != "" {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
